//! Man pages and shell completions of vsw's programs, from their clap definitions
//! (`clap_mangen`, `clap_complete`), so that they never drift from `--help`. Each
//! program writes its own when `VSW_GENERATE_DOCS=DIR` is set (the Debian package's
//! build does that), then exits: nothing else of it runs.
#![forbid(unsafe_code)]

use std::path::Path;

/// The environment variable naming the directory to write into.
pub const GENERATE_DOCS: &str = "VSW_GENERATE_DOCS";

/// Writes `cmd`'s man page (`man<section>/<name>.<section>`) and completions
/// (`completions/<name>.bash`, `_<name>` for zsh, `<name>.fish`) under `dir`.
pub fn write(cmd: clap::Command, section: &str, dir: &Path) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    let man_dir = dir.join(format!("man{section}"));
    std::fs::create_dir_all(&man_dir)?;
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .section(section)
        .render(&mut page)?;
    std::fs::write(man_dir.join(format!("{name}.{section}")), page)?;
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)?;
    for (shell, file) in [
        (clap_complete::Shell::Bash, format!("{name}.bash")),
        (clap_complete::Shell::Zsh, format!("_{name}")),
        (clap_complete::Shell::Fish, format!("{name}.fish")),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), &name, &mut out);
        std::fs::write(completions.join(file), out)?;
    }
    Ok(())
}

/// When `VSW_GENERATE_DOCS` names a directory: writes `cmd`'s documentation there and
/// ends the process (status 0, or 1 with the error).
pub fn write_if_asked(cmd: impl FnOnce() -> clap::Command, section: &str) {
    let Some(dir) = std::env::var_os(GENERATE_DOCS) else {
        return;
    };
    match write(cmd(), section, Path::new(&dir)) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!(
                "cannot write the documentation into {}: {e}",
                Path::new(&dir).display()
            );
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_and_three_completions_are_written() {
        let cmd = clap::Command::new("vswdemo").about("A demo").arg(
            clap::Arg::new("socket")
                .long("socket")
                .help("Control socket"),
        );
        let dir = std::env::temp_dir().join(format!("vsw-docgen-{}", std::process::id()));
        write(cmd, "8", &dir).unwrap();
        let page = std::fs::read_to_string(dir.join("man8/vswdemo.8")).unwrap();
        assert!(
            page.contains(".TH vswdemo 8") && page.contains("socket"),
            "{page}"
        );
        for f in ["vswdemo.bash", "_vswdemo", "vswdemo.fish"] {
            let c = std::fs::read_to_string(dir.join("completions").join(f)).unwrap();
            assert!(c.contains("socket"), "{f}: {c}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
