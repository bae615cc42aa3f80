"""headline figures: the achieved TFLOP/s and GB/s of each submission's headline case, stored
with the verdict so the problem page's boards read two columns instead of every shown entry's run
result (about 10 KB of JSON each; bench/leaderboard.py)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 06:10:00

Existing verdicts are filled from their public run of the current attempt.
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tflops', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('gbps', sa.Float(), nullable=True))
    from kernelrank.services.submissions import headline_case

    bind = op.get_bind()
    runs = sa.table('runs', sa.column('submission_id', sa.Integer), sa.column('kind', sa.String),
                    sa.column('attempt', sa.Integer), sa.column('result', sa.JSON))
    subs = sa.table('submissions', sa.column('id', sa.Integer), sa.column('attempt', sa.Integer),
                    sa.column('tflops', sa.Float), sa.column('gbps', sa.Float))
    q = (sa.select(runs.c.submission_id, runs.c.result).join(subs, subs.c.id == runs.c.submission_id)
         .where(runs.c.kind == 'public', runs.c.attempt == subs.c.attempt))
    update = (sa.update(subs).where(subs.c.id == sa.bindparam('sid'))
              .values(tflops=sa.bindparam('t'), gbps=sa.bindparam('g')))
    batch = []
    for sid, result in bind.execute(q).all():
        head = headline_case(result or {}) or {}
        if head.get('tflops') is not None or head.get('gbps') is not None:
            batch.append({'sid': sid, 't': head.get('tflops'), 'g': head.get('gbps')})
        if len(batch) >= BATCH:
            bind.execute(update, batch)
            batch = []
    if batch:
        bind.execute(update, batch)


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('gbps')
        batch_op.drop_column('tflops')
