"""Accounts: user names unique regardless of case and Unicode form (``users.name_folded``, the
NFKC case-folded name, under a unique index), and API tokens with an optional expiry and the
time they were last used (``api_tokens.expires_at``, ``api_tokens.last_used_at``)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 10:00:00

Existing names are brought to the rules new names follow (NFKC, surrounding whitespace removed:
the old check let ``"eve\\n"`` through beside ``"eve"``). Where two accounts then share a folded
name, one keeps it — an account whose stored name needed no change before one that did, then the
older — and each other one is renamed ``<name>-<id>``; a name that still breaks the rules becomes
``user-<id>``. Each rename is printed (``alembic`` / ``kernelrank serve --init-only`` output) and
logged; accounts, tokens and submissions are otherwise untouched (tokens sign in by their hash,
not by the name).
"""
import logging
import re
import unicodedata

from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")
#: kernelrank.services.users's rule for names, as of this migration
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def _renames(rows: list[tuple[int, str]]) -> dict[int, tuple[str, str]]:
    """``id -> (name, folded)`` for every account: the name it keeps or gets."""
    wanted = {}
    for uid, name in rows:
        clean = unicodedata.normalize("NFKC", name).strip()
        wanted[uid] = clean if _NAME.fullmatch(clean) else f"user-{uid}"
    # accounts whose name needs no change claim first, then the others; older before newer
    order = sorted(rows, key=lambda r: (wanted[r[0]] != r[1], r[0]))
    taken: set[str] = set()
    final = {}
    for uid, _name in order:
        name = wanted[uid]
        if _fold(name) in taken:
            suffix = f"-{uid}"
            name = name[:64 - len(suffix)] + suffix
        taken.add(_fold(name))
        final[uid] = (name, _fold(name))
    return final


def upgrade() -> None:
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name_folded', sa.String(length=64), nullable=True))

    conn = op.get_bind()
    rows = [(r[0], r[1]) for r in conn.execute(sa.text("SELECT id, name FROM users ORDER BY id"))]
    final = _renames(rows)
    changed = [(uid, old) for uid, old in rows if final[uid][0] != old]
    # two steps, so that no rename meets a name another row still has
    for uid, _old in changed:
        conn.execute(sa.text("UPDATE users SET name = :tmp WHERE id = :id"), {"tmp": f"~renaming-{uid}", "id": uid})
    for uid, old in rows:
        name, folded = final[uid]
        conn.execute(sa.text("UPDATE users SET name = :name, name_folded = :folded WHERE id = :id"),
                     {"name": name, "folded": folded, "id": uid})
    for uid, old in changed:
        message = f"0008: user {uid} renamed from {old!r} to {final[uid][0]!r} (names are unique regardless of case)"
        print(message)
        log.warning(message)

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.alter_column('name_folded', existing_type=sa.String(length=64), nullable=False)
        batch_op.create_index(batch_op.f('ix_users_name_folded'), ['name_folded'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_users_name_folded'))
        batch_op.drop_column('name_folded')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('last_used_at')
        batch_op.drop_column('expires_at')
