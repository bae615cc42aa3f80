"""``competitions``: competitions over boards with a time window, their boards, late entries an
admin accepted, and the re-judgings of their top entries at finalize

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 15:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'competitions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('final_top', sa.Integer(), nullable=False),
        sa.Column('created_by_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column('finalized_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('final_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('final_seed', sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.create_table(
        'competition_boards',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('competition_id', sa.Integer(), nullable=False),
        sa.Column('problem_revision_id', sa.Integer(), nullable=False),
        sa.Column('device', sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(['competition_id'], ['competitions.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['problem_revision_id'], ['problem_revisions.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('competition_id', 'problem_revision_id', 'device', name='uq_competition_boards_board'),
    )
    op.create_table(
        'competition_late_entries',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('competition_id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('accepted_by_id', sa.Integer(), nullable=True),
        sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['competition_id'], ['competitions.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['accepted_by_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('competition_id', 'submission_id', name='uq_competition_late_entries'),
    )
    op.create_table(
        'competition_rejudgings',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('competition_id', sa.Integer(), nullable=False),
        sa.Column('board_id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('place_before', sa.Integer(), nullable=False),
        sa.Column('score_before_ns', sa.Float(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('message', sa.Text(), nullable=False),
        sa.Column('results', sa.JSON(), nullable=False),
        sa.Column('final_score_ns', sa.Float(), nullable=True),
        sa.Column('final_score_low_ns', sa.Float(), nullable=True),
        sa.Column('final_score_high_ns', sa.Float(), nullable=True),
        sa.Column('runner', sa.String(length=255), nullable=True),
        sa.Column('starts', sa.Integer(), nullable=False),
        sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['competition_id'], ['competitions.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['board_id'], ['competition_boards.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('board_id', 'submission_id', name='uq_competition_rejudgings_entry'),
    )
    op.create_index('ix_competition_rejudgings_competition_id', 'competition_rejudgings', ['competition_id'])


def downgrade() -> None:
    op.drop_index('ix_competition_rejudgings_competition_id', table_name='competition_rejudgings')
    op.drop_table('competition_rejudgings')
    op.drop_table('competition_late_entries')
    op.drop_table('competition_boards')
    op.drop_table('competitions')
