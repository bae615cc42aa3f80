"""A leaderboard submission measured again by the service: ``submissions.measured_from``, the first
attempt whose runs count (issue 14)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 04:00:00

A submission whose runs were too noisy to rank, or disagree, gets a new attempt whose runs are
combined with the earlier ones; an admin's requeue moves ``measured_from`` to its new attempt.
Existing submissions get their current attempt: the runs of their earlier attempts (before a
requeue) stay history, as they were.
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('measured_from', sa.Integer(), nullable=False, server_default='1'))
    op.execute("UPDATE submissions SET measured_from = attempt")


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('measured_from')
