"""RFC 9162 tree math: the CT reference vectors, a naive reference, and properties."""

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.merkle import (
    EMPTY_ROOT,
    LeafList,
    RootBuilder,
    consistency_path,
    inclusion_path,
    leaf_hash,
    node_hash,
    root_of_leaves,
    verify_consistency,
    verify_inclusion,
)

# The Certificate Transparency reference leaves (RFC 6962 test suite).
LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# (leaf index, tree size, audit path) from the CT / Trillian reference tests.
INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
CONSISTENCY = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (3, 8, ["0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
            "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
]  # fmt: skip

HASHES = [leaf_hash(d) for d in LEAVES]


# A straightforward recursive reference, written from RFC 9162 §2.1 directly.
def ref_mth(leaves: list[bytes]) -> bytes:
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(ref_mth(leaves[:k]), ref_mth(leaves[k:]))


def ref_path(m: int, leaves: list[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*ref_path(m, leaves[:k]), ref_mth(leaves[k:])]
    return [*ref_path(m - k, leaves[k:]), ref_mth(leaves[:k])]


def ref_subproof(m: int, leaves: list[bytes], whole: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if whole else [ref_mth(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*ref_subproof(m, leaves[:k], whole), ref_mth(leaves[k:])]
    return [*ref_subproof(m - k, leaves[k:], False), ref_mth(leaves[:k])]


def hx(values: list[bytes]) -> list[str]:
    return [v.hex() for v in values]


class TestReferenceVectors:
    def test_empty_tree_is_sha256_of_nothing(self):
        """MTH({}) = SHA-256()."""
        assert root_of_leaves([]) == EMPTY_ROOT
        assert EMPTY_ROOT.hex().startswith("e3b0c442")

    def test_roots_for_sizes_1_to_8(self):
        """The published roots of the 8-leaf CT set, for every prefix."""
        for size in range(1, 9):
            assert root_of_leaves(HASHES[:size]).hex() == ROOTS[size - 1]
            assert ref_mth(HASHES[:size]).hex() == ROOTS[size - 1]

    def test_streaming_root_matches(self):
        """RootBuilder gives the same roots as the stored tree."""
        builder = RootBuilder()
        for size in range(1, 9):
            builder.add(HASHES[size - 1])
            assert builder.root().hex() == ROOTS[size - 1]

    def test_known_inclusion_paths(self):
        """The known audit paths come out, and verify against the known roots."""
        for index, size, expected in INCLUSION:
            path = inclusion_path(LeafList(HASHES[:size]), index, size)
            assert hx(path) == expected
            root = bytes.fromhex(ROOTS[size - 1])
            assert verify_inclusion(index, size, HASHES[index], path, root)

    def test_known_consistency_proofs(self):
        """The known consistency proofs come out, and verify against the known roots."""
        for old, new, expected in CONSISTENCY:
            path = consistency_path(LeafList(HASHES[:new]), old, new)
            assert hx(path) == expected
            assert verify_consistency(
                old, new, bytes.fromhex(ROOTS[old - 1]), bytes.fromhex(ROOTS[new - 1]), path
            )

    def test_trivial_consistency(self):
        """Equal sizes need equal roots and an empty proof; old size 0 is consistent."""
        r = bytes.fromhex(ROOTS[2])
        assert verify_consistency(3, 3, r, r, [])
        assert not verify_consistency(3, 3, r, EMPTY_ROOT, [])
        assert not verify_consistency(3, 3, r, r, [r])
        assert verify_consistency(0, 3, EMPTY_ROOT, r, [])
        assert not verify_consistency(2, 1, r, r, [])
        assert not verify_consistency(1, 2, r, r, [])

    def test_malformed_inclusion_inputs_fail(self):
        """Bad indexes, sizes, short hashes and padded paths fail, never raise."""
        index, size, expected = INCLUSION[0]
        path = [bytes.fromhex(h) for h in expected]
        root = bytes.fromhex(ROOTS[size - 1])
        assert not verify_inclusion(index, 0, HASHES[0], [], root)
        assert not verify_inclusion(size, size, HASHES[0], path, root)
        assert not verify_inclusion(-1, size, HASHES[0], path, root)
        assert not verify_inclusion(index, size, HASHES[0], [*path, root], root)
        assert not verify_inclusion(index, size, HASHES[0], [root, *path], root)
        assert not verify_inclusion(index, size, HASHES[0], path[:-1], root)
        assert not verify_inclusion(index, size, HASHES[0], [*path[:-1], b"x"], root)
        assert not verify_inclusion(index, size * 2, HASHES[0], path, root)
        assert not verify_inclusion(index + 1, size, HASHES[0], path, root)


def leaf_hashes(n: int, seed: int) -> list[bytes]:
    return [hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(n)]


def flip(value: bytes, bit: int) -> bytes:
    data = bytearray(value)
    data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


class TestProperties:
    @given(st.integers(1, 300), st.data())
    def test_inclusion_matches_reference_and_verifies(self, n, data):
        """Every inclusion proof equals the reference one and verifies; any flipped bit fails."""
        leaves = leaf_hashes(n, n)
        index = data.draw(st.integers(0, n - 1))
        source = LeafList(leaves)
        path = inclusion_path(source, index, n)
        assert path == ref_path(index, leaves)
        root = root_of_leaves(leaves)
        assert root == ref_mth(leaves)
        assert verify_inclusion(index, n, leaves[index], path, root)
        bit = data.draw(st.integers(0, 255))
        assert not verify_inclusion(index, n, flip(leaves[index], bit), path, root)
        assert not verify_inclusion(index, n, leaves[index], path, flip(root, bit))
        if path:
            which = data.draw(st.integers(0, len(path) - 1))
            bad = [*path]
            bad[which] = flip(bad[which], bit)
            assert not verify_inclusion(index, n, leaves[index], bad, root)

    @given(st.integers(1, 300), st.data())
    def test_consistency_matches_reference_and_verifies(self, n, data):
        """Every consistency proof equals the reference one and verifies; any flipped bit fails."""
        leaves = leaf_hashes(n, n + 7)
        m = data.draw(st.integers(1, n))
        source = LeafList(leaves)
        path = consistency_path(source, m, n)
        assert path == (ref_subproof(m, leaves, True) if m < n else [])
        old_root, new_root = root_of_leaves(leaves[:m]), root_of_leaves(leaves)
        assert verify_consistency(m, n, old_root, new_root, path)
        bit = data.draw(st.integers(0, 255))
        assert not verify_consistency(m, n, flip(old_root, bit), new_root, path)
        assert not verify_consistency(m, n, old_root, flip(new_root, bit), path)
        if path:
            which = data.draw(st.integers(0, len(path) - 1))
            bad = [*path]
            bad[which] = flip(bad[which], bit)
            assert not verify_consistency(m, n, old_root, new_root, bad)
