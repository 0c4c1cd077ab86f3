"""Generated names as Kubernetes makes them (apiserver/pkg/storage/names, util/rand)."""

from __future__ import annotations

from skiff.api.names import SAFE_ALPHABET, generate_name, object_hash, safe_encode
from skiff.api.validation import validate


def test_as1_generate_name_suffix_is_five_characters_without_vowels_or_look_alike_digits() -> None:
    names = {generate_name("web-") for _ in range(200)}
    assert len(names) > 190  # random, not a counter
    for name in names:
        assert name.startswith("web-") and len(name) == len("web-") + 5
        assert set(name[4:]) <= set(SAFE_ALPHABET)
        assert not set(name[4:]) & set("aeiou013")


def test_as7_generate_name_cuts_a_long_base_so_the_name_fits_63_characters() -> None:
    base = "a" * 62 + "-"
    name = generate_name(base)
    assert len(name) == 63 and name.startswith("a" * 58) and name[58:] != "a" * 5


def test_wl1_template_hash_spells_its_digits_in_the_safe_alphabet() -> None:
    assert safe_encode("0123456789") == "456789bcdf"  # as rand.SafeEncodeString
    digest = object_hash({"spec": {"containers": [{"name": "main"}]}})
    assert digest == object_hash({"spec": {"containers": [{"name": "main"}]}})
    assert set(digest) <= set(SAFE_ALPHABET)
    assert object_hash({"x": 1}, b"1") != object_hash({"x": 1})


def test_rbac_names_need_only_be_path_segments_as_in_kubernetes() -> None:
    """ValidateRBACName: `kubectl create clusterrole a:b` is a valid name (kube's bootstrap
    roles are named `system:controller:...`); `/` and `..` are still refused."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "team:reader"}, "rules": []}
    assert validate(role) == []
    for bad in ("a/b", ".."):
        errors = validate({**role, "metadata": {"name": bad}})
        assert [e.path for e in errors] == ["metadata.name"], errors
