//! `grist completions SHELL`: a completion script for the shell, made by
//! `clap_complete` from the same definitions that parse the command line,
//! so it never goes stale.

use std::process::ExitCode;

use clap_complete::Shell;

use crate::out::Out;

/// Arguments of `grist completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "The script goes to stdout. Examples:\n  \
    grist completions bash > ~/.local/share/bash-completion/completions/grist\n  \
    grist completions zsh > ~/.zfunc/_grist   # with fpath+=~/.zfunc before compinit\n  \
    grist completions fish > ~/.config/fish/completions/grist.fish\n  \
    grist completions powershell >> $PROFILE\n  \
    grist completions elvish >> ~/.config/elvish/rc.elv")]
pub(crate) struct Args {
    /// The shell: bash, zsh, fish, powershell or elvish.
    #[arg(value_enum)]
    shell: Shell,
}

/// Runs `grist completions`: the script for `command` (the whole CLI).
pub(crate) fn run(args: Args, mut command: clap::Command) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "grist", &mut script);
    let mut out = Out::stdout();
    out.bytes(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
