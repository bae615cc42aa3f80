"""``submissions.attempts`` becomes ``submissions.starts``: how many times the job was started,
not which judgement (that is ``submissions.attempt``) (issue 44)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 07:00:00
"""
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.alter_column('attempts', new_column_name='starts')


def downgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.alter_column('starts', new_column_name='attempts')
