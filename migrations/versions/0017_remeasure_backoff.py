"""``submissions.remeasure_at`` (when a measurement made again, waiting out its back-off, is sent
to its queue) and ``submissions.too_noisy_at`` (when the service stopped measuring a submission
again, still too noisy to rank, and told the admins)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 21:00:00
"""
import sqlalchemy as sa
from alembic import op


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('remeasure_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('too_noisy_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('too_noisy_at')
        batch_op.drop_column('remeasure_at')
