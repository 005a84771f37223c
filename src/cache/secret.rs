//! Who may write an entry the disk cache trusts: the running build of the linter, for this
//! user only.
//!
//! A random secret of the user, kept outside every workspace ([`SECRET_ENV`], else
//! `$XDG_CACHE_HOME/idem-lint/secret` or `~/.cache/idem-lint/secret`), is the key of
//! HMAC-SHA256, from which two values are derived for each build of the linter (its version
//! and executable):
//!
//! - the name of the build's directory, so a rebuilt linter never reads what another build
//!   stored;
//! - the key that authenticates each entry of that directory.
//!
//! Both are outputs of the MAC under the secret, so neither reveals the other nor the secret:
//! whoever sees the tree (or writes to it: a pull request that commits `target/idem-lint/`)
//! can name the directory but cannot make an entry that verifies.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Overrides the file holding this user's cache secret.
pub const SECRET_ENV: &str = "IDEM_LINT_CACHE_SECRET";

/// Length of an entry's authentication tag.
pub(super) const TAG_LEN: usize = 32;

/// One build's directory name and entry key.
pub(super) struct Build {
    pub(super) name: u128,
    key: [u8; 32],
}

impl Build {
    /// The build of the running executable, or `None` when it cannot be identified or the
    /// user's secret can be neither read nor made.
    pub(super) fn current(format: &[u8]) -> Option<Build> {
        let secret = user_secret()?;
        let exe = std::env::current_exe().ok()?;
        let meta = std::fs::metadata(exe).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()?;
        // A rebuild changes the executable's size or time even when the version does not.
        let name = mac(
            &secret,
            &[
                b"idem-lint cache directory",
                env!("CARGO_PKG_VERSION").as_bytes(),
                format,
                &meta.len().to_le_bytes(),
                &modified.as_nanos().to_le_bytes(),
            ],
        );
        let name = u128::from_le_bytes(name[..16].try_into().ok()?);
        Some(Build::named(name, &secret))
    }

    /// The build whose directory is `name`, with its entries keyed by `secret`.
    pub(super) fn named(name: u128, secret: &[u8]) -> Build {
        let key = mac(secret, &[b"idem-lint cache entries", &name.to_le_bytes()]);
        Build { name, key }
    }

    /// The user's build named `name` (tests stand in for other builds with it).
    pub(super) fn for_user(name: u128) -> Option<Build> {
        Some(Build::named(name, &user_secret()?))
    }

    /// The tag of the entry made of `parts`.
    pub(super) fn tag(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        mac(&self.key, parts)
    }

    /// Whether `tag` is the tag of `parts`, compared in constant time.
    pub(super) fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        hmac_of(&self.key, parts).verify_slice(tag).is_ok()
    }
}

fn hmac_of(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    for part in parts {
        // Length-prefixed: two different lists of parts never feed the MAC the same bytes.
        m.update(&(part.len() as u64).to_le_bytes());
        m.update(part);
    }
    m
}

fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; TAG_LEN] {
    hmac_of(key, parts).finalize().into_bytes().into()
}

/// This user's cache secret: 32 random bytes made on first use, in a file outside any
/// workspace. `None` (no cache) when it can be neither read nor made.
fn user_secret() -> Option<Vec<u8>> {
    let path = secret_path()?;
    let read = |p: &Path| std::fs::read(p).ok().filter(|b| b.len() == 32);
    if let Some(secret) = read(&path) {
        return Some(secret);
    }
    std::fs::create_dir_all(path.parent()?).ok()?;
    let mut fresh = [0u8; 32];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .ok()?
            .read_exact(&mut fresh)
            .ok()?;
    }
    // `create_new`: of two first runs at once, one writes and both read its secret.
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if let Ok(mut f) = options.open(&path) {
        f.write_all(&fresh).ok()?;
    }
    read(&path)
}

fn secret_path() -> Option<PathBuf> {
    match std::env::var_os(SECRET_ENV) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => Some(
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("idem-lint")
                .join("secret"),
        ),
    }
}
