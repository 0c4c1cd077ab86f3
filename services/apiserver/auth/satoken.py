"""ServiceAccount tokens (SPEC AX3, AU9): the TokenRequest API signs them, the authenticator
reads them and checks, on every request, that what they are bound to still exists.

Tokens are JWTs signed RS256 with the apiserver's service-account key (PyJWT +
cryptography), with the claims kube-apiserver puts in a bound token: `iss` (the
`--service-account-issuer`), `sub` = `system:serviceaccount:<ns>:<name>`, `aud`, `exp`,
`iat`, `nbf`, `jti`, and `kubernetes.io` with the namespace, the ServiceAccount's name and
uid, the object the token is bound to (a pod, with the node it runs on; a secret; a node)
and, for the kubelet's extended tokens, `warnafter`.

The key pair: `--service-account-signing-key-file` (PEM private key; created there on first
start when the file does not exist, so apiservers sharing a data dir share the key) and
optional `--service-account-key-file` (PEM public keys accepted for verifying, besides the
signing key's own). Without either flag an in-memory key is made (tokens then outlive no
restart).

Two steps, as in kube-apiserver: `TokenAuthority.verify(token)` checks the signature,
issuer, audience and times (None: not a valid token of ours, the authn chain moves on);
`TokenAuthority.validate(token, get)` then does what Kubernetes' `validator.Validate` does:
the ServiceAccount must exist with the uid in the token, and so must the bound pod, secret
or node (a pod-bound token also names the pod's node, which is not checked); an object
whose deletionTimestamp is more than a minute (the JWT leeway) in the past counts as gone,
so a terminating pod keeps its token until its grace period is over. `BoundObjects` is the
`get` the apiserver uses: the watch-fed copies of ServiceAccounts and pods (Kubernetes reads
informers), a live etcd read when the copy does not have the object (yet).

Legacy Secret-based tokens (`kubernetes.io/service-account-token` Secrets signed by the
`kubernetes/serviceaccount` issuer) are not made by Skiff and not accepted.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.apiserver.storage.lookups import Lookup
from skiff.auth import UserInfo
from skiff.clock import parse_rfc3339

if TYPE_CHECKING:
    from skiff.apiserver.storage.interface import Storage
    from skiff.apiserver.storage.watchcache import WatchCache

log = logging.getLogger(__name__)

# (resource, namespace or None, name) -> the object, or None when there is none
GetObject = Callable[[str, str | None, str], Awaitable[Obj | None]]

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600  # ValidateTokenRequest's MinTokenAgeSec
MAX_EXPIRATION_SECONDS = 1 << 32  # "may not specify a duration larger than 2^32 seconds"
# What ServiceAccount admission asks for the kube-api-access token: with
# --service-account-extend-token-expiration such a pod-bound token lives a year
# (ExpirationExtensionSeconds) and `warnafter` records the hour asked for.
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607
EXPIRATION_EXTENSION_SECONDS = 365 * 24 * 3600
# --service-account-max-token-expiration, when set, must lie in [1 h, 2^32 s]
MAX_TOKEN_EXPIRATION_RANGE = (3600, 1 << 32)
# go-jose's DefaultLeeway: clock skew allowed on exp/nbf/iat, and how long after its
# deletionTimestamp a bound object still counts
LEEWAY_SECONDS = 60
SA_PREFIX = "system:serviceaccount:"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


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


def _ref(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"name": str(meta.get("name", "")), "uid": str(meta.get("uid", ""))}


class TokenAuthority:
    """Signs TokenRequests and verifies the tokens it (or a peer with the same key) made.

    `max_expiration_seconds` (--service-account-max-token-expiration, 0: none) caps what a
    TokenRequest gets; `extend_expiration` (--service-account-extend-token-expiration)
    makes the kubelet's 3607-second pod-bound tokens live a year, as Kubernetes does."""

    def __init__(self, *, signing_key_file: str = "", key_file: str = "",
                 issuer: str = DEFAULT_ISSUER, audiences: tuple[str, ...] = (),
                 max_expiration_seconds: int = 0, extend_expiration: bool = True) -> None:
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
        low, high = MAX_TOKEN_EXPIRATION_RANGE
        if max_expiration_seconds and not low <= max_expiration_seconds <= high:
            raise ValueError("--service-account-max-token-expiration is out of range, must "
                             "be between 1 hour and 2^32 seconds")
        self.issuer = issuer
        self.audiences = audiences or (issuer,)
        self.max_expiration_seconds = max_expiration_seconds
        self.extend_expiration = extend_expiration
        # The extended lifetime, never beyond an explicit maximum.
        self.max_extended_expiration_seconds = (
            min(EXPIRATION_EXTENSION_SECONDS, max_expiration_seconds)
            if max_expiration_seconds else EXPIRATION_EXTENSION_SECONDS)

    def issue(self, *, namespace: str, service_account: Obj, audiences: list[str] | None,
              expiration_seconds: int, bound_pod: Obj | None = None,
              bound_secret: Obj | None = None, bound_node: Obj | None = None,
              pod_node: Obj | None = None, warn_after_seconds: int = 0,
              now: float | None = None) -> tuple[str, int]:
        """A signed token and its expiry (unix seconds) for `service_account`, bound to at
        most one of `bound_pod` (then `pod_node` is the node it runs on, for information),
        `bound_secret` and `bound_node`."""
        issued = int(now if now is not None else time.time())
        expires = issued + expiration_seconds
        meta = service_account["metadata"]
        private: Obj = {"namespace": namespace,
                        "serviceaccount": {"name": meta["name"],
                                           "uid": meta.get("uid", "")}}
        if bound_pod is not None:
            private["pod"] = _ref(bound_pod)
            if pod_node is not None:
                private["node"] = _ref(pod_node)
        elif bound_secret is not None:
            private["secret"] = _ref(bound_secret)
        elif bound_node is not None:
            private["node"] = _ref(bound_node)
        if warn_after_seconds:
            private["warnafter"] = issued + warn_after_seconds
        claims: Obj = {
            "iss": self.issuer, "sub": f"{SA_PREFIX}{namespace}:{meta['name']}",
            "aud": list(audiences or self.audiences), "iat": issued, "nbf": issued,
            "exp": expires, "jti": str(uuid.uuid4()), "kubernetes.io": private,
        }
        return jwt.encode(claims, self._key, algorithm="RS256"), expires

    def claims(self, token: str) -> Obj | None:
        for key in self._public_keys:
            try:
                decoded: Obj = jwt.decode(token, key, algorithms=["RS256"],
                                          audience=list(self.audiences), issuer=self.issuer,
                                          leeway=LEEWAY_SECONDS,
                                          options={"require": ["exp", "iss", "sub"]})
            except jwt.PyJWTError:
                continue
            return decoded
        return None

    def verify(self, token: str) -> UserInfo | None:
        """The ServiceAccount a bearer token names, or None if it is not a valid token of
        ours. Does not check that what it is bound to still exists (see `validate`)."""
        claims = self.claims(token)
        return _user(claims) if claims is not None else None

    async def validate(self, token: str, get: GetObject, *,
                       now: float | None = None) -> UserInfo | None:
        """`verify`, then Kubernetes' `validator.Validate`: the ServiceAccount exists with
        the token's uid, and so does the pod, secret or node the token is bound to; one
        deleted (deletionTimestamp) more than LEEWAY_SECONDS ago counts as gone. None when
        the token is not ours or no longer valid."""
        claims = self.claims(token)
        user = _user(claims) if claims is not None else None
        if claims is None or user is None:
            return None
        private = claims["kubernetes.io"]
        namespace = str(private["namespace"])
        gone_before = (time.time() if now is None else now) - LEEWAY_SECONDS
        try:
            sa = private["serviceaccount"]
            if not _alive(await get("serviceaccounts", namespace, str(sa["name"])),
                          str(sa.get("uid") or ""), gone_before):
                return None
            for key, resource, ns in (("secret", "secrets", namespace),
                                      ("pod", "pods", namespace)):
                ref = private.get(key)
                if isinstance(ref, dict) and not _alive(
                        await get(resource, ns, str(ref.get("name") or "")),
                        str(ref.get("uid") or ""), gone_before):
                    return None
            node = private.get("node")
            if isinstance(node, dict) and "pod" not in private and not _alive(
                    await get("nodes", None, str(node.get("name") or "")),
                    str(node.get("uid") or ""), gone_before):
                return None
        except ApiError as err:  # storage unavailable: not authenticated, as Kubernetes
            log.warning("cannot validate a ServiceAccount token",
                        extra={"user": user.name, "error": err.message})
            return None
        return user


def _user(claims: Obj) -> UserInfo | None:
    private = claims.get("kubernetes.io")
    if not isinstance(private, dict):
        return None
    sa = private.get("serviceaccount")
    sa = sa if isinstance(sa, dict) else {}
    namespace, name = private.get("namespace"), sa.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace \
            or not name or claims.get("sub") != f"{SA_PREFIX}{namespace}:{name}":
        return None
    extra: dict[str, list[str]] = {}
    pod = private.get("pod")
    if isinstance(pod, dict) and pod.get("name"):
        extra[EXTRA_POD_NAME] = [str(pod["name"])]
        extra[EXTRA_POD_UID] = [str(pod.get("uid") or "")]
    node = private.get("node")
    if isinstance(node, dict) and node.get("name"):
        extra[EXTRA_NODE_NAME] = [str(node["name"])]
        if node.get("uid"):
            extra[EXTRA_NODE_UID] = [str(node["uid"])]
    if claims.get("jti"):
        extra[EXTRA_CREDENTIAL_ID] = [f"JTI={claims['jti']}"]
    return service_account_user(namespace, name, str(sa.get("uid") or ""), extra)


def _alive(obj: Obj | None, uid: str, gone_before: float) -> bool:
    """The object a token names still stands: it exists, has the token's uid, and is not
    past its deletion (deletionTimestamp + leeway)."""
    if obj is None:
        return False
    meta = obj.get("metadata") or {}
    deleted = meta.get("deletionTimestamp")
    if deleted:
        try:
            if parse_rfc3339(str(deleted)) < gone_before:
                return False
        except ValueError:
            return False
    return str(meta.get("uid") or "") == uid


class BoundObjects:
    """What tokens are bound to, read as kube-apiserver's token getter reads them: from
    watch-fed copies (ServiceAccounts: the registry's admission copy; pods: one kept here),
    a live read when the copy does not have the object. Secrets and nodes, which few
    tokens name, are read live. `run()` keeps the pod copy current."""

    def __init__(self, storage: Storage, cache: WatchCache, *,
                 service_accounts: Lookup | None = None) -> None:
        self._lookups = {
            "serviceaccounts": service_accounts or Lookup("serviceaccounts", storage, cache),
            "pods": Lookup("pods", storage, cache),
            # never run: Lookup.get reads etcd while its copy is not synced
            "secrets": Lookup("secrets", storage, cache),
            "nodes": Lookup("nodes", storage, cache),
        }

    async def run(self) -> None:
        await self._lookups["pods"].run()

    async def get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        lookup = self._lookups[resource]
        if not name:
            return None
        return await lookup.get(f"{namespace or ''}/{name}" if lookup.info.namespaced
                                else name)
