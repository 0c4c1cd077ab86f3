"""ServiceAccount tokens (SPEC AX3): the TokenRequest API signs them, `verify()` reads them.

Tokens are JWTs signed RS256 with the apiserver's service-account key (PyJWT +
cryptography), with the claims kube-apiserver puts in a bound token: `iss` (the
`--service-account-issuer`), `sub` = `system:serviceaccount:<ns>:<name>`, `aud`, `exp`,
`iat`, `nbf`, and `kubernetes.io` with the namespace, ServiceAccount name and uid (and the
pod it is bound to, if any).

The key pair: `--service-account-signing-key-file` (PEM private key; created there on first
start when the file does not exist, so apiservers sharing a data dir share the key) and
optional `--service-account-key-file` (PEM public keys accepted for verifying, besides the
signing key's own). Without either flag an in-memory key is made (tokens then outlive no
restart).

The authentication seam for the authn chain (issue 14):

    TokenAuthority.verify(token: str) -> UserInfo | None

None means "not a ServiceAccount token of ours" (bad signature, wrong issuer or audience,
expired, malformed): the chain moves on to its next authenticator. Whether the
ServiceAccount (and bound pod) still exists is checked by `verify_live()`, which also takes a
lookup function, as kube-apiserver's legacy/bound token validator does.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from skiff.auth import UserInfo

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
SA_PREFIX = "system:serviceaccount:"


def service_account_user(namespace: str, name: str, uid: str = "",
                         extra: dict[str, list[str]] | None = None) -> UserInfo:
    return UserInfo(name=f"{SA_PREFIX}{namespace}:{name}", uid=uid,
                    groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                            "system:authenticated"),
                    extra={key: tuple(values) for key, values in (extra or {}).items()})


def _load_or_create_private_key(path: Path) -> rsa.RSAPrivateKey:
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another apiserver of the same data dir made it first; read theirs
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
            return key
        for _ in range(50):  # the other writer may still be writing
            if path.stat().st_size:
                break
            time.sleep(0.05)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ValueError(f"--service-account-signing-key-file {path}: not an RSA private key")
    return loaded


class TokenAuthority:
    """Signs TokenRequests and verifies the tokens it (or a peer with the same key) made."""

    def __init__(self, *, signing_key_file: str = "", key_file: str = "",
                 issuer: str = DEFAULT_ISSUER, audiences: tuple[str, ...] = ()) -> None:
        if signing_key_file:
            self._key = _load_or_create_private_key(Path(signing_key_file))
        else:
            log.warning("no --service-account-signing-key-file: ServiceAccount tokens are "
                        "signed with a key that lives only as long as this process")
            self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._public_keys: list[Any] = [self._key.public_key()]
        if key_file:
            self._public_keys.append(serialization.load_pem_public_key(
                Path(key_file).read_bytes()))
        self.issuer = issuer
        self.audiences = audiences or (issuer,)

    def issue(self, *, namespace: str, service_account: Obj, audiences: list[str] | None,
              expiration_seconds: int, bound_pod: Obj | None = None,
              now: float | None = None) -> tuple[str, int]:
        """A signed token and its expiry (unix seconds) for `service_account`."""
        issued = int(now if now is not None else time.time())
        expires = issued + expiration_seconds
        meta = service_account["metadata"]
        claims: Obj = {
            "iss": self.issuer, "sub": f"{SA_PREFIX}{namespace}:{meta['name']}",
            "aud": list(audiences or self.audiences), "iat": issued, "nbf": issued,
            "exp": expires, "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": namespace,
                              "serviceaccount": {"name": meta["name"],
                                                 "uid": meta.get("uid", "")}},
        }
        if bound_pod is not None:
            claims["kubernetes.io"]["pod"] = {"name": bound_pod["metadata"]["name"],
                                              "uid": bound_pod["metadata"].get("uid", "")}
        return jwt.encode(claims, self._key, algorithm="RS256"), expires

    def claims(self, token: str) -> Obj | None:
        for key in self._public_keys:
            try:
                decoded: Obj = jwt.decode(token, key, algorithms=["RS256"],
                                          audience=list(self.audiences), issuer=self.issuer,
                                          options={"require": ["exp", "iss", "sub"]})
            except jwt.PyJWTError:
                continue
            return decoded
        return None

    def verify(self, token: str) -> UserInfo | None:
        """The ServiceAccount a bearer token names, or None if it is not a valid token of
        ours. Does not check that the ServiceAccount still exists (see `verify_live`)."""
        claims = self.claims(token)
        if claims is None:
            return None
        private = claims.get("kubernetes.io") or {}
        sa = private.get("serviceaccount") or {}
        namespace, name = private.get("namespace"), sa.get("name")
        if not namespace or not name or claims.get("sub") != f"{SA_PREFIX}{namespace}:{name}":
            return None
        extra: dict[str, list[str]] = {}
        pod = private.get("pod") or {}
        if pod.get("name"):
            extra["authentication.kubernetes.io/pod-name"] = [pod["name"]]
            extra["authentication.kubernetes.io/pod-uid"] = [pod.get("uid", "")]
        if claims.get("jti"):
            extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims['jti']}"]
        return service_account_user(namespace, name, sa.get("uid", ""), extra)

    async def verify_live(self, token: str,
                          get: Callable[[str, str, str], Awaitable[Obj | None]]
                          ) -> UserInfo | None:
        """`verify`, then check that the ServiceAccount (and the bound pod) still exist with
        the same uid; `get(resource, namespace, name)` reads an object or None."""
        user = self.verify(token)
        if user is None:
            return None
        namespace, name = user.name[len(SA_PREFIX):].split(":", 1)
        sa = await get("serviceaccounts", namespace, name)
        if sa is None or (user.uid and sa["metadata"].get("uid") != user.uid):
            return None
        pod_name = user.extra.get("authentication.kubernetes.io/pod-name")
        if pod_name:
            pod = await get("pods", namespace, pod_name[0])
            if pod is None or pod["metadata"].get("uid") != user.extra[
                    "authentication.kubernetes.io/pod-uid"][0]:
                return None
        return user
