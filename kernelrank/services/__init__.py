"""The service layer: plain functions over a SQLAlchemy ``Session``, called by the HTTP routes, the
CLI and the control worker alike. They raise :class:`ServiceError` subclasses that carry an HTTP
status, and never commit (the caller's session scope does)."""


class ServiceError(Exception):
    """A refused request; ``status_code`` is the HTTP status the API answers with."""

    status_code = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(ServiceError):
    status_code = 404


class Invalid(ServiceError):
    status_code = 422


class Forbidden(ServiceError):
    status_code = 403


class Conflict(ServiceError):
    status_code = 409


class TooLarge(ServiceError):
    status_code = 413
