"""kernelguard signal and open code: each submission's advisory scan by the static hack detector
``kernelguard`` (JSON, shown to admins), and a problem's ``code_open`` flag (its ranked
submissions' code goes into exports)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 13:20:00

Existing submissions are left unscanned (``guard`` NULL); a submission is scanned when its verdict
is recorded.
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('guard', sa.JSON(), nullable=True))
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.add_column(sa.Column('code_open', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.drop_column('code_open')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('guard')
