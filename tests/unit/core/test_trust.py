"""ledger.core.trust: which keys may sign which entries."""

import copy
import datetime as dt

import pytest

from ledger.core.envelope import parse_line
from ledger.core.timefmt import format_ts
from ledger.core.trust import (
    TRUST_FORMAT,
    Revocation,
    TrustedKey,
    TrustStore,
    TrustStoreError,
    only_widens,
    trust_document,
    trust_from_document,
    trusted_key_for,
)
from ledger.errors import EXIT_DATA
from tests.helpers.chains import BASE_TIME, build_chain, foreign_line, signer

KEY = signer(1)
OTHER = signer(2)
ROOT = signer(99)
US = dt.timedelta(microseconds=1)
T0 = BASE_TIME


def _entry(at: dt.datetime, key=KEY, *, unsigned: bool = False):
    line = build_chain(1, key, start=at)[0].line
    if unsigned:
        line = foreign_line(line, "unsigned")
    return parse_line(line[:-1])


def _store(*keys: TrustedKey, **kwargs) -> TrustStore:
    return TrustStore(keys=keys, **kwargs)


class TestValidityWindow:
    def test_window_is_inclusive(self):
        """Entries sealed exactly at valid_from or valid_until count; a microsecond outside fails."""
        store = _store(TrustedKey(KEY.key_id, KEY.public_raw, T0, T0 + dt.timedelta(hours=1)))
        assert store.signature_problem(_entry(T0), strict=False) is None
        assert store.signature_problem(_entry(T0 + dt.timedelta(hours=1)), strict=False) is None
        before = store.signature_problem(_entry(T0 - US), strict=False)
        after = store.signature_problem(_entry(T0 + dt.timedelta(hours=1) + US), strict=False)
        assert before == f"signing key {KEY.key_id} is not valid at {format_ts(T0 - US)}"
        assert after is not None
        assert "not valid at" in after

    def test_open_ended_windows(self):
        """A missing valid_from or valid_until leaves that side open."""
        key = TrustedKey(KEY.key_id, KEY.public_raw)
        assert key.covers(dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
        assert key.covers(dt.datetime(9999, 1, 1, tzinfo=dt.UTC))


class TestRevocation:
    def test_revoked_from_a_moment(self):
        """A revocation with revoked_at fails entries at or after it, not before."""
        store = _store(
            TrustedKey(KEY.key_id, KEY.public_raw), revocations=(Revocation(KEY.key_id, T0),)
        )
        assert store.signature_problem(_entry(T0 - US), strict=False) is None
        assert store.signature_problem(_entry(T0), strict=False) == (
            f"signing key {KEY.key_id} is revoked"
        )

    def test_revoked_for_all_time(self):
        """A revocation without revoked_at fails every entry of that key."""
        store = _store(
            TrustedKey(KEY.key_id, KEY.public_raw), revocations=(Revocation(KEY.key_id),)
        )
        assert "revoked" in (store.signature_problem(_entry(T0), strict=False) or "")

    def test_revocation_applies_to_any_id_keys(self):
        """A revoked key id fails even when the key is trusted only as an any-id key."""
        store = TrustStore(revocations=(Revocation(KEY.key_id),)).with_any_id_key(KEY.public_raw)
        assert "revoked" in (store.signature_problem(_entry(T0), strict=False) or "")

    def test_other_keys_unaffected(self):
        """Revoking one key leaves another key's entries valid."""
        store = _store(
            TrustedKey(KEY.key_id, KEY.public_raw),
            TrustedKey(OTHER.key_id, OTHER.public_raw),
            revocations=(Revocation(KEY.key_id),),
        )
        assert store.signature_problem(_entry(T0, OTHER), strict=False) is None


class TestUnsignedEntries:
    def test_unsigned_before_strict_after_is_accepted(self):
        """Without --strict, an unsigned entry before strict_after passes."""
        store = _store(strict_after=T0)
        assert store.signature_problem(_entry(T0 - US, unsigned=True), strict=False) is None

    def test_unsigned_at_or_after_strict_after_fails(self):
        """An unsigned entry at or after strict_after fails."""
        store = _store(strict_after=T0)
        expected = "entry is unsigned at or after strict_after"
        assert store.signature_problem(_entry(T0, unsigned=True), strict=False) == expected
        assert store.signature_problem(_entry(T0 + US, unsigned=True), strict=False) == expected

    def test_strict_fails_every_unsigned_entry(self):
        """With strict, an unsigned entry fails whatever strict_after says."""
        problem = TrustStore().signature_problem(_entry(T0, unsigned=True), strict=True)
        assert problem == "entry is unsigned (--strict)"

    def test_no_strict_after_accepts_unsigned(self):
        """Without strict_after and strict, unsigned entries pass (SPEC: only those two fail them)."""
        assert TrustStore().signature_problem(_entry(T0, unsigned=True), strict=False) is None


class TestKeys:
    def test_unknown_key(self):
        """A signed entry whose key id the store does not know fails."""
        assert TrustStore().signature_problem(_entry(T0), strict=False) == (
            f"unknown signing key {KEY.key_id}"
        )

    def test_named_key_with_wrong_public_key(self):
        """A key id bound to another public key fails the signature."""
        store = _store(TrustedKey(KEY.key_id, OTHER.public_raw))
        assert store.signature_problem(_entry(T0), strict=False) == "signature does not verify"

    def test_any_id_key_verifies_any_key_id(self):
        """A key trusted without an id verifies entries whatever their signing_key_id."""
        store = TrustStore().with_any_id_key(OTHER.public_raw).with_any_id_key(KEY.public_raw)
        assert store.signature_problem(_entry(T0), strict=False) is None

    def test_any_id_key_must_verify(self):
        """With only non-matching any-id keys the signature does not verify."""
        store = TrustStore().with_any_id_key(OTHER.public_raw)
        assert store.signature_problem(_entry(T0), strict=False) == "signature does not verify"

    def test_named_key_takes_precedence_over_any_id(self):
        """A named key's window decides; any-id keys are only tried for ids the store lacks."""
        store = _store(TrustedKey(KEY.key_id, KEY.public_raw, T0 + US)).with_any_id_key(
            KEY.public_raw
        )
        assert "not valid at" in (store.signature_problem(_entry(T0), strict=False) or "")

    def test_with_key_replaces_same_id(self):
        """with_key replaces a key with the same id; key() finds it."""
        store = _store(TrustedKey(KEY.key_id, OTHER.public_raw)).with_key(
            TrustedKey(KEY.key_id, KEY.public_raw)
        )
        assert len(store.keys) == 1
        found = store.key(KEY.key_id)
        assert found is not None
        assert found.public_raw == KEY.public_raw

    def test_ends_validity(self):
        """ends_validity sets valid_until of one key, leaving unknown ids alone."""
        store = _store(trusted_key_for(KEY, T0)).ends_validity(KEY.key_id, T0 + US)
        found = store.key(KEY.key_id)
        assert found is not None
        assert found.valid_until == T0 + US
        assert store.ends_validity("nosuchkey", T0) == store


def _full_store() -> TrustStore:
    return TrustStore(
        keys=(
            TrustedKey(KEY.key_id, KEY.public_raw, T0, T0 + dt.timedelta(days=1)),
            TrustedKey(OTHER.key_id, OTHER.public_raw, None, None),
        ),
        revocations=(Revocation(KEY.key_id, T0 + dt.timedelta(hours=2), "leaked"),),
        strict_after=T0,
    )


class TestTrustDocument:
    def test_round_trip(self):
        """A store written as a document reads back equal."""
        store = _full_store()
        document = trust_document(store)
        assert document["format"] == TRUST_FORMAT
        assert document["root_signature"] is None
        assert trust_from_document(document) == store

    def test_root_signed_with_pinned_root(self):
        """A document signed by the root verifies when that root is pinned."""
        store = _full_store()
        document = trust_document(store, ROOT)
        assert document["root_signature"]["key_id"] == ROOT.key_id
        assert trust_from_document(document, pinned_root=ROOT.public_raw) == store

    def test_unsigned_rejected_when_root_pinned(self):
        """With a pinned root, a document without a root signature is refused."""
        with pytest.raises(TrustStoreError, match="root signature"):
            trust_from_document(trust_document(_full_store()), pinned_root=ROOT.public_raw)

    def test_other_root_rejected(self):
        """A document signed by another key than the pinned root is refused."""
        document = trust_document(_full_store(), OTHER)
        with pytest.raises(TrustStoreError, match="root signature"):
            trust_from_document(document, pinned_root=ROOT.public_raw)

    @pytest.mark.parametrize(
        "tamper",
        [
            lambda d: d["keys"][0].__setitem__("valid_until", None),
            lambda d: d["keys"].append(
                {"key_id": "evil", "public_key": d["keys"][1]["public_key"],
                 "valid_from": None, "valid_until": None}
            ),
            lambda d: d.__setitem__("revocations", []),
            lambda d: d.__setitem__("strict_after", None),
            lambda d: d["root_signature"].__setitem__("signature", "A" * 86 + "=="),
            lambda d: d.__setitem__("root_signature", None),
        ],
        ids=["extend-window", "add-key", "drop-revocation", "drop-strict-after",
             "bad-signature", "strip-signature"],
    )  # fmt: skip
    def test_tampered_document_rejected(self, tamper):
        """Any change to a root-signed document makes it fail under the pinned root."""
        document = trust_document(_full_store(), ROOT)
        tampered = copy.deepcopy(document)
        tamper(tampered)
        with pytest.raises(TrustStoreError, match="root signature"):
            trust_from_document(tampered, pinned_root=ROOT.public_raw)

    def test_signed_document_readable_without_pin(self):
        """Without a pinned root the root signature is not required (nor checked)."""
        assert trust_from_document(trust_document(_full_store(), ROOT)) == _full_store()

    @pytest.mark.parametrize(
        "document",
        [
            None,
            [],
            {"format": "other"},
            {"format": TRUST_FORMAT},
            {"format": TRUST_FORMAT, "keys": [{"key_id": "Bad Id", "public_key": "AA=="}]},
            {"format": TRUST_FORMAT, "keys": [{"key_id": "k", "public_key": "AAAA"}]},
            {"format": TRUST_FORMAT, "keys": [{"key_id": "k", "public_key": "not b64"}]},
            {"format": TRUST_FORMAT, "keys": [], "strict_after": "yesterday"},
            {"format": TRUST_FORMAT, "keys": [], "revocations": [{"reason": "x"}]},
        ],
    )
    def test_malformed_document(self, document):
        """Malformed documents raise TrustStoreError, which exits 65 (bad input data)."""
        with pytest.raises(TrustStoreError) as info:
            trust_from_document(document, source="ts.json")
        assert info.value.exit_code == EXIT_DATA
        assert "trust store" in str(info.value) or "ts.json" in str(info.value)


class TestOnlyWidens:
    """Which trust changes leave every verified entry verified (the state is carried over)."""

    BEFORE = TrustStore(keys=(TrustedKey(KEY.key_id, KEY.public_raw),), strict_after=T0)

    def test_a_key_added_or_signatures_asked_for_later_only_widens(self):
        added = self.BEFORE.with_key(TrustedKey(OTHER.key_id, OTHER.public_raw, signs=False))
        assert only_widens(self.BEFORE, added)
        assert only_widens(self.BEFORE, added.with_strict_after(T0 + US))
        assert only_widens(self.BEFORE, TrustStore(keys=self.BEFORE.keys))  # never asked for
        assert only_widens(self.BEFORE, self.BEFORE)

    @pytest.mark.parametrize(
        ("before", "after"),
        [
            (BEFORE, BEFORE.with_revocation(Revocation(KEY.key_id, T0, "lost"))),
            (BEFORE, BEFORE.ends_validity(KEY.key_id, T0)),
            (BEFORE, BEFORE.with_key(TrustedKey(KEY.key_id, OTHER.public_raw))),
            (BEFORE, BEFORE.with_strict_after(T0 - US)),
            (TrustStore(keys=BEFORE.keys), BEFORE),
            (BEFORE, TrustStore(strict_after=T0)),
        ],
        ids=["revoked", "validity-ended", "key-replaced", "signatures-earlier",
             "signatures-asked-for", "key-removed"],
    )  # fmt: skip
    def test_any_other_change_is_verified_again(self, before, after):
        assert not only_widens(before, after)

    def test_with_keys_tried_for_any_id_no_key_may_be_added(self):
        loose = self.BEFORE.with_any_id_key(OTHER.public_raw)
        added = loose.with_key(TrustedKey(OTHER.key_id, OTHER.public_raw))
        assert not only_widens(loose, added)
        assert not only_widens(self.BEFORE, loose)
