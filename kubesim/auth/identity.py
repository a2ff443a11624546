"""Authentication by bearer token, as kube-apiserver's token authenticators answer it.

- The admin token (`--token`, the one in the kubeconfig kubesim writes) is user `kubesim-admin` in the
  `system:masters` group: a cluster-admin whatever the authorization mode.
- A static token file (`--token-auth-file`, kube-apiserver's CSV format): `token,user,uid,"group1,group2"`.
- ServiceAccount tokens kubesim issues (`POST .../serviceaccounts/NAME/token`, a `TokenRequest`): user
  `system:serviceaccount:NS:NAME` in the groups `system:serviceaccounts`, `system:serviceaccounts:NS`. A token
  stops working when it expires or when its ServiceAccount is deleted (it is bound to the account's uid).

Every authenticated user is also in `system:authenticated`.
"""

from __future__ import annotations

import csv
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ADMIN_USER = "kubesim-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
DEFAULT_SA_TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class UserInfo:
    """An authenticated identity."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)

    def to_json(self) -> dict:
        """As `userInfo` in an AdmissionReview or a SelfSubjectReview."""
        body: dict = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            body["uid"] = self.uid
        if self.extra:
            body["extra"] = self.extra
        return body


ADMIN = UserInfo(ADMIN_USER, groups=(MASTERS, AUTHENTICATED))


def with_authenticated(name: str, uid: str, groups: list[str] | tuple[str, ...]) -> UserInfo:
    """A user whose groups include `system:authenticated` (once)."""
    listed = [g for g in groups if g]
    if AUTHENTICATED not in listed:
        listed.append(AUTHENTICATED)
    return UserInfo(name, uid, tuple(listed))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a ServiceAccount's token authenticates as."""
    return with_authenticated(f"{SA_PREFIX}{namespace}:{name}", uid,
                              ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"])


def parse_service_account(user: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:NS:NAME` user name, None for other users."""
    if not user.startswith(SA_PREFIX):
        return None
    namespace, _, name = user[len(SA_PREFIX):].partition(":")
    return (namespace, name) if namespace and name else None


class TokenFileError(ValueError):
    """A static token file kubesim cannot read."""


def read_token_file(path: str | Path) -> dict[str, UserInfo]:
    """token → user from a kube-apiserver token file: `token,user,uid[,"group1,group2,..."]` per line."""
    users: dict[str, UserInfo] = {}
    with open(path, newline="") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 3:
                raise TokenFileError(f"{path}:{number}: expected token,user,uid[,groups], got {len(row)} fields")
            token, user, uid = (c.strip() for c in row[:3])
            groups = [g.strip() for g in row[3].split(",")] if len(row) > 3 else []
            if not token or not user:
                raise TokenFileError(f"{path}:{number}: empty token or user")
            users[token] = with_authenticated(user, uid, groups)
    return users


@dataclass
class IssuedToken:
    """A ServiceAccount token kubesim issued."""

    namespace: str
    name: str
    uid: str
    expires: float  # epoch seconds
    audiences: tuple[str, ...]


class Authenticator:
    """Bearer token → UserInfo (None: not authenticated). `token` None and no token file: authentication is
    off and every request is the admin, as kubesim always behaved with `--no-auth`."""

    def __init__(self, admin_token: str | None, static: dict[str, UserInfo] | None = None) -> None:
        self.admin_token = admin_token
        self.static = dict(static or {})
        self.issued: dict[str, IssuedToken] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.admin_token or self.static)

    def issue(self, namespace: str, name: str, uid: str, *, seconds: int = DEFAULT_SA_TOKEN_SECONDS,
              audiences: tuple[str, ...] = ()) -> tuple[str, float]:
        """A new token for ServiceAccount NS/NAME (uid: the account's), valid for `seconds`; (token, expiry)."""
        token = f"kubesim-sa.{secrets.token_urlsafe(32)}"
        expires = time.time() + seconds
        self.issued[token] = IssuedToken(namespace, name, uid, expires, audiences)
        return token, expires

    def authenticate(self, token: str | None, account_uid: Callable[[str, str], str | None]) -> UserInfo | None:
        """The user of `token`; `account_uid(namespace, name)` gives a stored ServiceAccount's uid (or None),
        so a deleted (or re-created) account's tokens stop working."""
        if not self.enabled:
            return ADMIN
        if not token:
            return None
        if self.admin_token and secrets.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN
        user = self.static.get(token)
        if user is not None:
            return user
        issued = self.issued.get(token)
        if issued is None:
            return None
        if issued.expires < time.time() or account_uid(issued.namespace, issued.name) != issued.uid:
            self.issued.pop(token, None)
            return None
        return service_account_user(issued.namespace, issued.name, issued.uid)
