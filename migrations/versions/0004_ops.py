"""leaderboard index: each user's best ranked submission per revision and device

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 03:10:00

A partial index over ranked submissions only, in the order the leaderboard's window function
reads them (per user, best score first): Postgres answers the ranking with an index-only scan
and no sort (bench/leaderboard.py: 100,000 submissions).
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_submissions_user_best', 'submissions',
                    ['problem_revision_id', 'device', 'user_id', 'score_ns', 'created_at', 'id'],
                    postgresql_where=sa.text('ranked'), sqlite_where=sa.text('ranked = 1'))


def downgrade() -> None:
    op.drop_index('ix_submissions_user_best', table_name='submissions')
