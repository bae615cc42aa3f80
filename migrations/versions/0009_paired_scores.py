"""Paired scores: each submission's speedup interval and score interval, and the calibrations
(reference times per problem revision and device queue) that scores are based on

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-25 10:00:00

Existing submissions keep their scores and get no interval (NULL): they were timed against
cached reference timings, not in pairs, and are never shown as tied. Calibrations start empty;
each board's is established by its next leaderboard runs (kernelrank.services.calibration).
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('speedup_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('speedup_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('score_low_ns', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('score_high_ns', sa.Float(), nullable=True))
    op.create_table(
        'calibrations',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('problem_revision_id', sa.Integer(), nullable=False),
        sa.Column('device', sa.String(length=64), nullable=False),
        sa.Column('runs', sa.Integer(), nullable=False),
        sa.Column('samples', sa.JSON(), nullable=False),
        sa.Column('reference_ns', sa.JSON(), nullable=False),
        sa.Column('final', sa.Boolean(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['problem_revision_id'], ['problem_revisions.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('problem_revision_id', 'device', name='uq_calibrations_board'),
    )


def downgrade() -> None:
    op.drop_table('calibrations')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('score_high_ns')
        batch_op.drop_column('score_low_ns')
        batch_op.drop_column('speedup_high')
        batch_op.drop_column('speedup_low')
