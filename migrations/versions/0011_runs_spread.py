"""A leaderboard submission's spread between its two runs: ``submissions.runs_spread`` (tau^2 of
the log speedup beyond the runs' own errors), pooled over a board's recent submissions into a floor
under the next ones' intervals (issue 14)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 23:00:00

Existing submissions are left NULL: they do not count towards their board's spread (their runs
are still stored; measuring them again fills it in).
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('runs_spread', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('runs_spread')
