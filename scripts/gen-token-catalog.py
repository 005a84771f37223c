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
3. Every entry is classified by what a repeat of the request does without its token
   (`repeat_effect` below; the rule is the doc of `RepeatEffect` in tokens/mod.rs):
   - `NoEffect` when the operation's verb removes, ends or sets something (`delete_*`,
     `stop_*`, `update_*`, `put_*`, `associate_*`, ... NO_EFFECT_VERBS): a repeat leaves the
     same state, or fails because the thing is gone; unless the token's documentation says
     it keeps a retry from making a duplicate or a new version (MAKES_COPIES: Secrets
     Manager's `put_secret_value` adds a version per request);
   - `Conflicts` when the operation makes a thing (MAKE_VERBS: `create`, `register`,
     `import`, `copy`) and its input has a required member naming it (`name`, or
     `<noun>_name`/`<noun>_identifier` for a trailing part of the operation's noun:
     `create_change_set` requires `change_set_name`), or applies a one-shot thing named by
     `<noun>_name` (ONCE_VERBS: `execute_change_set`); required-ness is read from the
     `This field is required.` line the SDK writes on the input builder's setter. A repeat
     fails with AlreadyExists (or finds the thing applied) instead of making a second one;
   - `Duplicates` otherwise (`create_job`, `run_instances`, `start_execution`,
     `transact_write_items`): a repeat makes a second resource or effect.
4. MANUAL adds what no setter name reveals (Step Functions `StartExecution` dedupes on `name`);
   EXCLUDE drops members the SDK fills although they name an existing thing rather than the
   request (Athena `StopQueryExecution`'s `query_execution_id`).

Usage: python3 scripts/gen-token-catalog.py [--fetch] [--registry DIR] [--check] [--table-crates]
`--check` exits 1 when the committed table differs from what the sources give.
`--table-crates` rescans only the crates the committed table names, at the versions its footer
lists (a scratch crate pinning them, `--fetch`ed, is enough): the other crates have no entry
at those versions, so the output is the same as a full scan's. Use it to apply changed rules.
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

# Verbs whose repeat leaves the state the first call made (or fails because the thing is
# gone): they remove, end, or set something to given values.
NO_EFFECT_VERBS = {
    "delete", "remove", "deregister", "disassociate", "detach", "disconnect",
    "cancel", "stop", "terminate", "disable", "deactivate", "enable", "activate",
    "reject", "accept", "release", "revoke",
    "update", "put", "set", "modify", "reset", "rename", "tag", "untag",
    "associate", "attach",
    "get", "describe", "list", "query",
}

# A token documented as what keeps a retry from making a duplicate or a new version
# (Secrets Manager `put_secret_value`): the verb's "no effect" does not hold.
MAKES_COPIES = re.compile(r"duplicate|new version", re.IGNORECASE)

# Verbs that make a thing: with a required name of that thing, a repeat meets the first one.
MAKE_VERBS = {"create", "register", "import", "copy"}
# Verbs that apply a named one-shot thing (`execute_change_set`, `rollback_stack`): a repeat
# finds it applied. Other verbs (`start_flow(flow_name)`) run a named thing again.
ONCE_VERBS = {"execute", "rollback"}

# SDK input builders mark required members with this line right above the setter.
REQUIRED = re.compile(r"/// This field is required\.\n\s*pub fn (\w+)\(")


def repeat_effect(op, required, token_doc):
    """(effect, member): what repeating `op` without its token does; `required` holds the
    required members of its input, `token_doc` the token setter's documentation. `member` is
    the naming member behind `Conflicts`."""
    verb, *noun = op.split("_")
    if verb in NO_EFFECT_VERBS and not MAKES_COPIES.search(token_doc):
        return "NoEffect", None
    if verb in MAKE_VERBS:
        names = {"name"}
        for i in range(len(noun)):
            part = "_".join(noun[i:])
            names |= {part + "_name", part + "_identifier"}
    elif verb in ONCE_VERBS:
        names = {"_".join(noun) + "_name"}
    else:
        names = set()
    member = next((m for m in sorted(required) if m in names), None)
    if member is not None:
        return "Conflicts", member
    return "Duplicates", None


def required_members(op_dir, op):
    path = os.path.join(op_dir, f"_{op}_input.rs")
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return set(REQUIRED.findall(f.read()))


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


def table_sources(registry):
    """The committed table's crates at the versions its footer lists, and that list."""
    with open(OUT) as f:
        text = f.read()
    in_table = {k.replace("_", "-") for k in re.findall(r'krate: "(aws_sdk_\w+)"', text)}
    footer = text[text.index("// Generated from:"):].split()
    versions = sorted(w for w in footer if w.startswith("aws-sdk-"))
    sources = {}
    for v in versions:
        m = re.match(r"(aws-sdk-[a-z0-9-]+?)-(\d+\.\d+\.\d+.*)$", v)
        if m and m.group(1) in in_table:
            dirs = glob.glob(os.path.join(registry, "*", v))
            if not dirs:
                raise SystemExit(f"{v} is not in the registry: fetch the table's crates first")
            sources[m.group(1)] = dirs[0]
    return sources, versions


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
    entries = []  # (crate, op, member, fill, note, (repeat effect, naming member))
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
            required = required_members(os.path.dirname(builders_rs), op)
            for member in sorted(filled):
                if member not in docs or (krate, op, member) in EXCLUDE:
                    continue
                repeat = repeat_effect(op, required, docs[member])
                entries.append((krate, op, member, "SdkUuid", note_of(docs[member]), repeat))
            for member in TOKEN_SETTERS:
                if member in filled or member not in docs:
                    continue
                doc = docs[member]
                if IDEMPOTENT.search(doc) or (krate, op, member) in FORCE_INCLUDE:
                    repeat = repeat_effect(op, required, doc)
                    entries.append((krate, op, member, "Unset", note_of(doc), repeat))
                else:
                    excluded.append((krate, op, member, note_of(doc)))
    for krate, op, member, note in MANUAL:
        src = sources.get(krate.replace("_", "-"))
        if src is None:
            continue
        op_dir = os.path.join(src, "src", "operation", op)
        with open(os.path.join(op_dir, "builders.rs")) as f:
            if member not in setter_docs(f.read()):
                raise SystemExit(f"{krate} {op} has no `{member}` setter any more")
        with open(os.path.join(op_dir, "builders.rs")) as f:
            doc = setter_docs(f.read())[member]
        repeat = repeat_effect(op, required_members(op_dir, op), doc)
        entries.append((krate, op, member, "Unset", note, repeat))
    entries.sort()
    return entries, excluded


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(entries, versions):
    crates = sorted({e[0] for e in entries})
    out = [
        "// @generated by scripts/gen-token-catalog.py from the sources of "
        f"{len(versions)} aws-sdk-* crates; do not edit.",
        f"// {len(entries)} operations in {len(crates)} crates. Regenerate after adding crates to",
        "// scripts/aws-sdk-crates.txt: `python3 scripts/gen-token-catalog.py --fetch`.",
        "",
        "use super::{Fill, RepeatEffect, TokenApi};",
        "",
        "/// Every AWS SDK operation whose request takes an idempotency token.",
        "#[rustfmt::skip]",
        "pub static AWS: &[TokenApi] = &[",
    ]
    for krate, op, member, fill, note, (effect, naming) in entries:
        naming = f"Some({rust_str(naming)})" if naming else "None"
        out.append(
            f"    TokenApi {{ krate: {rust_str(krate)}, method: {rust_str(op)}, "
            f"token: {rust_str(member)}, fill: Fill::{fill}, repeat: RepeatEffect::{effect}, "
            f"naming: {naming}, note: {rust_str(note)} }},"
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
    ap.add_argument(
        "--table-crates",
        action="store_true",
        help="rescan only the committed table's crates, at its footer's versions",
    )
    args = ap.parse_args()

    names = crate_names()
    if args.table_crates:
        sources, versions = table_sources(args.registry)
    else:
        if args.fetch:
            fetch(names)
        sources = newest_sources(args.registry, set(names))
        versions = sorted(os.path.basename(d) for d in sources.values())
        missing = sorted(set(names) - set(sources))
        if missing:
            print(f"not in the registry (run with --fetch): {' '.join(missing)}", file=sys.stderr)
            return 2
    entries, excluded = scan(sources)
    if args.excluded:
        for e in excluded:
            print("excluded:", *e, sep="\t")
    text = render(entries, versions)
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
    effects = {k: sum(1 for e in entries if e[5][0] == k) for k in ("Duplicates", "Conflicts", "NoEffect")}
    print(
        f"{len(entries)} operations ({fills} filled by the SDK) from {len(sources)} crates, "
        f"{len(excluded)} token-named setters excluded -> {os.path.relpath(OUT, ROOT)}"
    )
    print("repeat effects: " + ", ".join(f"{k} {v}" for k, v in effects.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
