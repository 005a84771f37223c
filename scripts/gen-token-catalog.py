#!/usr/bin/env python3
"""Regenerates lints/src/catalog/tokens/aws.rs: the AWS operations that take an idempotency token.

The table is read from the AWS SDK for Rust's own generated sources, not typed by hand:

1. `--fetch` writes a scratch crate (default /tmp/sdkscan) depending on every service crate
   listed in scripts/aws-sdk-crates.txt and runs `cargo fetch` in it (downloads only, no build).
2. For the newest version of each crate in the cargo registry, every operation module
   `src/operation/<op>.rs` + `src/operation/<op>/builders.rs` is read:
   - a member the SDK fills itself (`input.<member> = Some(token_provider.make_idempotency_token())`,
     generated for Smithy `@idempotencyToken` members) is an entry with `Fill::SdkUuid`;
   - a fluent-builder setter named `client_token`, `client_request_token` or `idempotency_token`
     that the SDK does not fill is an entry with `Fill::Unset` when its documentation describes
     deduplication of retried requests (IDEMPOTENT below), and is reported as excluded otherwise
     (CodePipeline's third-party job `client_token` is a credential, not a request token).
3. MANUAL adds what no setter name reveals (Step Functions `StartExecution` dedupes on `name`);
   EXCLUDE drops members the SDK fills although they name an existing thing rather than the
   request (Athena `StopQueryExecution`'s `query_execution_id`).

Usage: python3 scripts/gen-token-catalog.py [--fetch] [--registry DIR] [--check]
`--check` exits 1 when the committed table differs from what the sources give.
"""

import argparse
import glob
import html
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATE_LIST = os.path.join(ROOT, "scripts", "aws-sdk-crates.txt")
OUT = os.path.join(ROOT, "lints", "src", "catalog", "tokens", "aws.rs")
SCRATCH = "/tmp/sdkscan"

TOKEN_SETTERS = ("client_token", "client_request_token", "idempotency_token")

SDK_FILLED = re.compile(
    r"input\.(\w+) = ::std::option::Option::Some\(token_provider\.make_idempotency_token\(\)\)"
)

# Documentation of a token setter the SDK does not fill that still describes request
# deduplication. Anything else is printed as excluded, for a human to read.
IDEMPOTENT = re.compile(
    r"idempot|no more than one time|only once|more than once|multiple times|don't run multiple"
    r"|duplicate|retry|repeat the request|same client token|same token|same <code>clienttoken",
    re.IGNORECASE,
)

# (crate, operation, member, note): idempotency keys that are not named like a token.
MANUAL = [
    (
        "aws_sdk_sfn",
        "start_execution",
        "name",
        "A Standard workflow starts one execution per name for 90 days (same name and input "
        "returns the running execution); without a name Step Functions generates a UUID.",
    ),
]

# Setters named like a token whose documentation does not mention deduplication, but which are
# idempotency tokens all the same (checked against the service documentation).
FORCE_INCLUDE = {
    ("aws_sdk_chimesdkvoice", "create_voice_profile_domain", "client_request_token"),
    ("aws_sdk_chimesdkvoice", "start_speaker_search_task", "client_request_token"),
    ("aws_sdk_chimesdkvoice", "start_voice_tone_analysis_task", "client_request_token"),
    ("aws_sdk_cloudformation", "rollback_stack", "client_request_token"),
    ("aws_sdk_codebuild", "start_sandbox", "idempotency_token"),
    ("aws_sdk_comprehend", "start_flywheel_iteration", "client_request_token"),
    ("aws_sdk_panorama", "create_package_import_job", "client_token"),
    ("aws_sdk_serverlessapplicationrepository", "create_cloud_formation_change_set", "client_token"),
}


# (crate, operation, member): members the Smithy model marks `@idempotencyToken` that identify an
# existing resource or a service-issued id the caller must pass back, so "set it from the message"
# is wrong advice (and they are always set anyway).
EXCLUDE = {
    ("aws_sdk_athena", "delete_named_query", "named_query_id"),
    ("aws_sdk_athena", "stop_query_execution", "query_execution_id"),
    ("aws_sdk_chimesdkmessaging", "channel_flow_callback", "callback_id"),
}


def crate_names():
    with open(CRATE_LIST) as f:
        words = " ".join(l for l in f if not l.startswith("#")).split()
    return ["aws-sdk-" + w for w in words]


def fetch(names):
    os.makedirs(os.path.join(SCRATCH, "src"), exist_ok=True)
    with open(os.path.join(SCRATCH, "src", "main.rs"), "w") as f:
        f.write("fn main() {}\n")
    with open(os.path.join(SCRATCH, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "sdkscan"\nversion = "0.0.0"\nedition = "2021"\n\n')
        f.write("[dependencies]\n")
        for n in names:
            f.write(f'{n} = "1"\n')
    subprocess.run(["cargo", "fetch"], cwd=SCRATCH, check=True)


def version_key(v):
    return [int(p) if p.isdigit() else p for p in re.split(r"[.-]", v)]


def newest_sources(registry, names):
    """crate name -> source dir of its newest version in the registry."""
    found = {}
    for d in glob.glob(os.path.join(registry, "*", "aws-sdk-*")):
        base = os.path.basename(d)
        m = re.match(r"(aws-sdk-[a-z0-9-]+?)-(\d+\.\d+\.\d+.*)$", base)
        if not m or m.group(1) not in names:
            continue
        name, ver = m.groups()
        if name not in found or version_key(ver) > version_key(found[name][0]):
            found[name] = (ver, d)
    return {n: d for n, (v, d) in found.items()}


def setter_docs(builders):
    """setter name -> its doc comment, as plain text."""
    docs = {}
    lines = builders.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*pub fn (\w+)\(mut self", line)
        if not m:
            continue
        j = i - 1
        doc = []
        while j >= 0 and lines[j].strip().startswith("///"):
            doc.insert(0, lines[j].strip()[3:].strip())
            j -= 1
        docs.setdefault(m.group(1), " ".join(doc))
    return docs


def note_of(doc):
    """The first sentence of `doc` that speaks of deduplication, else its first sentence."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", doc))
    text = re.sub(r"\s+", " ", text).strip()
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z<])", text) if s]
    best = next((s for s in sentences if IDEMPOTENT.search(s)), sentences[0] if sentences else "")
    best = re.sub(r"\s+([.,;:)])", r"\1", best).strip()
    if len(best) > 120:
        best = best[:117].rstrip() + "..."
    return best


def scan(sources):
    entries = []  # (crate, op, member, fill, note)
    excluded = []
    for name, src in sorted(sources.items()):
        krate = name.replace("-", "_")
        for op_rs in sorted(glob.glob(os.path.join(src, "src", "operation", "*.rs"))):
            op = os.path.basename(op_rs)[:-3]
            builders_rs = os.path.join(src, "src", "operation", op, "builders.rs")
            if not os.path.exists(builders_rs):
                continue
            with open(op_rs) as f:
                filled = set(SDK_FILLED.findall(f.read()))
            with open(builders_rs) as f:
                docs = setter_docs(f.read())
            for member in sorted(filled):
                if member not in docs or (krate, op, member) in EXCLUDE:
                    continue
                entries.append((krate, op, member, "SdkUuid", note_of(docs[member])))
            for member in TOKEN_SETTERS:
                if member in filled or member not in docs:
                    continue
                doc = docs[member]
                if IDEMPOTENT.search(doc) or (krate, op, member) in FORCE_INCLUDE:
                    entries.append((krate, op, member, "Unset", note_of(doc)))
                else:
                    excluded.append((krate, op, member, note_of(doc)))
    for krate, op, member, note in MANUAL:
        src = sources.get(krate.replace("_", "-"))
        if src is None:
            continue
        with open(os.path.join(src, "src", "operation", op, "builders.rs")) as f:
            if member not in setter_docs(f.read()):
                raise SystemExit(f"{krate} {op} has no `{member}` setter any more")
        entries.append((krate, op, member, "Unset", note))
    entries.sort()
    return entries, excluded


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(entries, sources):
    crates = sorted({e[0] for e in entries})
    versions = sorted(os.path.basename(d) for d in sources.values())
    out = [
        "// @generated by scripts/gen-token-catalog.py from the sources of "
        f"{len(sources)} aws-sdk-* crates; do not edit.",
        f"// {len(entries)} operations in {len(crates)} crates. Regenerate after adding crates to",
        "// scripts/aws-sdk-crates.txt: `python3 scripts/gen-token-catalog.py --fetch`.",
        "",
        "use super::{Fill, TokenApi};",
        "",
        "/// Every AWS SDK operation whose request takes an idempotency token.",
        "#[rustfmt::skip]",
        "pub static AWS: &[TokenApi] = &[",
    ]
    for krate, op, member, fill, note in entries:
        out.append(
            f"    TokenApi {{ krate: {rust_str(krate)}, method: {rust_str(op)}, "
            f"token: {rust_str(member)}, fill: Fill::{fill}, note: {rust_str(note)} }},"
        )
    out.append("];")
    out.append("")
    out.append("// Generated from:")
    line = "//"
    for v in versions:
        if len(line) + len(v) + 1 > 100:
            out.append(line)
            line = "//"
        line += " " + v
    out.append(line)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fetch", action="store_true", help="cargo fetch the crates first")
    ap.add_argument(
        "--registry",
        default=os.path.expanduser("~/.cargo/registry/src"),
        help="cargo's registry source directory",
    )
    ap.add_argument("--check", action="store_true", help="compare with the committed table")
    ap.add_argument("--excluded", action="store_true", help="list excluded token setters")
    args = ap.parse_args()

    names = crate_names()
    if args.fetch:
        fetch(names)
    sources = newest_sources(args.registry, set(names))
    missing = sorted(set(names) - set(sources))
    if missing:
        print(f"not in the registry (run with --fetch): {' '.join(missing)}", file=sys.stderr)
        return 2
    entries, excluded = scan(sources)
    if args.excluded:
        for e in excluded:
            print("excluded:", *e, sep="\t")
    text = render(entries, sources)
    if args.check:
        with open(OUT) as f:
            if f.read() != text:
                print(f"{OUT} is out of date", file=sys.stderr)
                return 1
        return 0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    fills = sum(1 for e in entries if e[3] == "SdkUuid")
    print(
        f"{len(entries)} operations ({fills} filled by the SDK) from {len(sources)} crates, "
        f"{len(excluded)} token-named setters excluded -> {os.path.relpath(OUT, ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
