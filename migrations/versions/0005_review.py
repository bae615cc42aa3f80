"""review flag: a submission whose speedup is beyond its problem's review bound is marked on the
leaderboard until an admin clears it

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 03:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('needs_review', sa.Boolean(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('review_reason', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('review_reason')
        batch_op.drop_column('needs_review')
