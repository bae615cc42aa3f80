"""``run_samples``: each run's judged paired samples per timed case, for a score's reproducibility
bundle

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 11:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'run_samples',
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('cases', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('run_id'),
    )


def downgrade() -> None:
    op.drop_table('run_samples')
