#!/bin/sh
# standin.sh IMAGE: makes IMAGE, a local stand-in for the Go builder image
# (golang:1.26-bookworm), from this machine's own Go, busybox-static and CA
# certificates, where no image registry can be reached. It does nothing when
# IMAGE is already in buildah's storage. BUILDAH is the buildah command with
# its storage options (default: buildah).
#
# The stand-in has what the Dockerfile's build stage runs: go (GOROOT
# /usr/local/go, GOPATH /go), a POSIX shell and the utilities of busybox, and
# /etc/ssl/certs/ca-certificates.crt. It needs root (buildah mount, chroot).
set -eu

image=${1:?usage: standin.sh IMAGE}
BUILDAH=${BUILDAH:-buildah}
goroot=$(go env GOROOT)

if $BUILDAH inspect --type image "$image" >/dev/null 2>&1; then
	exit 0
fi
for f in "$goroot/bin/go" /bin/busybox /etc/ssl/certs/ca-certificates.crt; do
	[ -e "$f" ] || { echo "standin.sh: $f is missing (apt-get install busybox-static ca-certificates)" >&2; exit 1; }
done

c=$($BUILDAH from scratch)
trap '$BUILDAH rm "$c" >/dev/null 2>&1 || true' EXIT
m=$($BUILDAH mount "$c")
mkdir -p "$m/usr/local" "$m/bin" "$m/etc/ssl/certs" "$m/go" "$m/tmp" "$m/root"
chmod 1777 "$m/tmp"
cp -a "$goroot" "$m/usr/local/go"
cp /bin/busybox "$m/bin/busybox"
chroot "$m" /bin/busybox --install -s /bin ||
	{ echo "standin.sh: /bin/busybox does not run alone (apt-get install busybox-static)" >&2; exit 1; }
cp /etc/ssl/certs/ca-certificates.crt "$m/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$m/etc/passwd"
printf 'root:x:0:\n' >"$m/etc/group"
$BUILDAH umount "$c" >/dev/null
$BUILDAH config --env PATH=/go/bin:/usr/local/go/bin:/bin --env GOPATH=/go --env GOTOOLCHAIN=local \
	--workingdir /go "$c"
$BUILDAH commit --quiet "$c" "$image" >/dev/null
