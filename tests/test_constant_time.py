"""No secret is ever compared with ``==`` or ``!=``: an AST scan of every module in gg/.

A comparison is suspect when a name, attribute or subscript key in it looks like a secret
(token, credential, secret, digest, hash, nonce, signature, password). Secrets are compared
only through :func:`gg.domain.tokens.same_digest` (``hmac.compare_digest``), and looked up
by their SHA-256 in an index, so the time an answer takes says nothing about how close a
guess came. The few comparisons below involve public values that merely share a word.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gg

SECRET = re.compile(r"token|credential|secret|digest|hash|nonce|signature|password|passphrase",
                    re.IGNORECASE)
ROOT = Path(gg.__file__).resolve().parent

# (module, the comparison as ast.unparse prints it): why it is not a secret.
PUBLIC = {
    ("gg/domain/pool_planner.py", "m.digest != digest"): "an image's content digest is public",
    ("gg/pool/image.py", "actual != digest"): "an image's content digest is public",
    ("gg/control/cel.py", "cause.token.type == '$END'"): "a CEL parser token, not a secret",
    ("gg/control/credentials.py", "clean != (runner.credential_refs or [])"):
        "credential references (kind, ref, fingerprint) are public by design",
    ("gg/control/maintenance.py", "credentials_digest != refs_digest(runner.credential_refs or [])"):
        "a digest of public credential references",
    ("gg/control/strategies.py", "was != digest"): "an image's content digest is public",
    ("gg/runner/fleet.py", "maintenance.store_digest(self.state_dir) != self._synced"):
        "a digest of the credential store's public references, never of a secret",
    ("gg/control/removals.py", "token_status(t, now) == 'active'"): "a token's status word",
    ("gg/control/removals.py", "len(tokens) != 1"): "how many tokens (for the sentence's grammar)",
    ("gg/domain/groups.py", "tokens != 1"): "how many tokens (for the sentence's grammar)",
    ("gg/domain/groups.py", "tokens == 1"): "how many tokens (for the sentence's grammar)",
    ("gg/domain/runners.py", "stated_policy != policy_digest(runner.policy)"):
        "a digest of the runner's policy, which an admin sets and every row shows",
    ("gg/control/artifacts.py", "before['sha256'] == digest"):
        "an artifact's content digest, shown to anyone who reads the flight",
    ("gg/pool/drivers/container.py", "out.strip() == f'[\"{digest}\"]'"):
        "an image's content digest is public",
    ("gg/runner/flight_artifacts.py", "counted.hexdigest() != given.sha256"):
        "an input's content digest, shown to anyone who reads the flight it came from",
    ("gg/server/routes/artifacts.py", "counted.hexdigest() != digest"):
        "an artifact's content digest, which its uploader states",
}


def _words(node: ast.AST):
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n.id
        elif isinstance(n, ast.Attribute):
            yield n.attr
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
            yield str(n.slice.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" \
                and n.args and isinstance(n.args[0], ast.Constant):
            yield str(n.args[0].value)


def _is_truth_value(node: ast.AST) -> bool:
    """``(a is None) == (b is None)`` compares two booleans, not the values themselves."""
    return isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)


def secret_comparisons(root: Path = ROOT) -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = f"gg/{path.relative_to(root).as_posix()}"
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if not isinstance(node, ast.Compare):
                continue
            if not any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
                continue
            operands = [o for o in (node.left, *node.comparators) if not _is_truth_value(o)]
            if any(SECRET.search(word) for o in operands for word in _words(o)):
                text = ast.unparse(node)
                if (rel, text) not in PUBLIC:
                    found.append((rel, node.lineno, text))
    return found


def test_no_secret_is_compared_with_eq_or_ne():
    found = secret_comparisons()
    assert not found, ("compare secrets with gg.domain.tokens.same_digest, never == or != "
                       "(or add a public value to PUBLIC with the reason):\n" +
                       "\n".join(f"  {f}:{line}: {text}" for f, line, text in found))


def test_the_scan_catches_a_plain_comparison_of_a_secret(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def ok(row, wanted):\n    return row['token_hash'] == wanted\n"
                   "def ok2(credential, given):\n    return given != credential\n")
    found = secret_comparisons(tmp_path)
    assert [line for _, line, _ in found] == [2, 4]


def test_same_digest_is_the_constant_time_comparison():
    from gg.domain import tokens

    source = Path(tokens.__file__).read_text()
    assert "hmac.compare_digest" in source
    assert tokens.same_digest(tokens.digest("ggp_x"), tokens.digest("ggp_x"))
    assert not tokens.same_digest(tokens.digest("ggp_x"), tokens.digest("ggp_y"))
