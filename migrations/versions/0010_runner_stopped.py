"""A runner that stops says so: ``runners.stopped_at``, set by the runner's last message when it
shuts down (shown offline at once instead of after ``runner_online_seconds``), cleared by its
next heartbeat

Revision ID: 0010
Revises: 0007
Create Date: 2026-11-25 18:00:00

Existing runners are left as they are (``stopped_at`` NULL: online while their heartbeats are
recent).
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runners', schema=None) as batch_op:
        batch_op.add_column(sa.Column('stopped_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runners', schema=None) as batch_op:
        batch_op.drop_column('stopped_at')
