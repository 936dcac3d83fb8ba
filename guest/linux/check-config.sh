#!/bin/sh
# Checks that every setting of a Kconfig fragment survived into a final .config: Kconfig
# silently drops a request whose dependencies are unmet, so a typo or a renamed option would
# otherwise go unnoticed.  Usage: check-config.sh FRAGMENT CONFIG
set -eu
frag=$1
config=$2
bad=0
while IFS= read -r line; do
    case $line in
    "# CONFIG_"*" is not set")
        sym=${line#"# "}
        sym=${sym%% *}
        if got=$(grep "^$sym=" "$config"); then
            echo "$frag: asked '$line', got '$got'" >&2
            bad=1
        fi ;;
    CONFIG_*=*)
        if ! grep -qxF "$line" "$config"; then
            sym=${line%%=*}
            got=$(grep "^$sym=" "$config" || echo "# $sym is not set")
            echo "$frag: asked '$line', got '$got'" >&2
            bad=1
        fi ;;
    esac
done < "$frag"
[ $bad -eq 0 ] || echo "$frag: Kconfig did not keep the settings above (unmet dependencies?)" >&2
exit $bad
