"""accounts and problem administration: passwords, web sessions, problem visibility and deadline,
submission attempts (requeue) and disqualification

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 02:45:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('password_hash', sa.String(length=255), nullable=True))

    op.create_table('web_sessions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_web_sessions_user_id'), ['user_id'], unique=False)

    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hidden', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('deadline', sa.DateTime(timezone=True), nullable=True))

    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempt', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('disqualified_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('disqualified_reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('disqualified_by_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_submissions_disqualified_by_id_users', 'users',
                                    ['disqualified_by_id'], ['id'], ondelete='SET NULL')

    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempt', sa.Integer(), server_default='1', nullable=False))
        batch_op.drop_constraint('uq_runs_submission_kind', type_='unique')
        batch_op.create_unique_constraint('uq_runs_submission_attempt_kind', ['submission_id', 'attempt', 'kind'])


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_constraint('uq_runs_submission_attempt_kind', type_='unique')
        batch_op.create_unique_constraint('uq_runs_submission_kind', ['submission_id', 'kind'])
        batch_op.drop_column('attempt')

    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_constraint('fk_submissions_disqualified_by_id_users', type_='foreignkey')
        batch_op.drop_column('disqualified_by_id')
        batch_op.drop_column('disqualified_reason')
        batch_op.drop_column('disqualified_at')
        batch_op.drop_column('attempt')

    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.drop_column('deadline')
        batch_op.drop_column('hidden')

    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_web_sessions_user_id'))

    op.drop_table('web_sessions')

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('password_hash')
