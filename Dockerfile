# One image for every KernelRank process: API, control worker, runners, the one-shot set-up.
#
#   docker build -t kernelrank .                                   # CPU torch wheel
#   docker build -t kernelrank --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
#
# The package is installed in editable mode from /app: the problems, reference kernels and
# migrations are read from the checkout's folders next to the code.
FROM python:3.11-slim

ARG TORCH_SPEC="torch==2.13.0"
ARG TORCH_INDEX_URL="https://download.pytorch.org/whl/cpu"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KERNELRANK_DATA_DIR=/data \
    KERNELRANK_CACHE_DIR=/cache

# g++: C++ submissions are built on the runner (torch.utils.cpp_extension.load_inline, with ninja)
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/*

# torch first, from the chosen wheel index, so the package's `torch>=2.5` is already satisfied
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kernelrank ./kernelrank
COPY api ./api
COPY runner ./runner
COPY migrations ./migrations
COPY problems ./problems
COPY reference_kernels ./reference_kernels
# the runner services' entrypoint: a writable cgroup subtree for the job groups (docker-compose.yml)
COPY deploy/runner-entrypoint.sh /usr/local/bin/kernelrank-runner-entrypoint
# redis and psycopg: the clients for the deployment's broker and database
RUN pip install ninja "redis>=5" "psycopg[binary]>=3.1" \
    && pip install -e .

# Submitted code runs as this unprivileged user, never as root.
RUN useradd --create-home --uid 10001 kernelrank \
    && mkdir -p /data /cache \
    && chown kernelrank:kernelrank /data /cache
USER kernelrank

EXPOSE 8000
CMD ["kernelrank", "--help"]
