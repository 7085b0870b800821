#!/bin/bash
# Start a private "system" bus + real polkitd + real fprintd (virtual_device) under $1 (a fresh dir),
# run a smoke test (enroll, verify match, verify no-match), then tear everything down.
set -u
D=${1:-/tmp/fprintd-lab/h}; rm -rf "$D"; mkdir -p "$D/state"
cat > "$D/bus.conf" <<CONF
<busconfig>
  <type>system</type>
  <listen>unix:path=$D/bus.sock</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
CONF
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$D/bus.sock
t0=$(date +%s%N)
dbus-daemon --config-file="$D/bus.conf" --nofork --nosyslog --print-address=3 3>"$D/addr" 2>"$D/bus.err" & BUS=$!
until [ -s "$D/addr" ]; do sleep 0.01; done
/usr/lib/polkit-1/polkitd --no-debug >"$D/polkitd.log" 2>&1 & PK=$!
FP_VIRTUAL_DEVICE=$D/fp.sock FP_DRIVERS_WHITELIST=virtual_device STATE_DIRECTORY=$D/state \
  G_MESSAGES_DEBUG=all /usr/libexec/fprintd -t >"$D/fprintd.log" 2>&1 & FP=$!
has() { gdbus call --system -d org.freedesktop.DBus -o /org/freedesktop/DBus -m org.freedesktop.DBus.NameHasOwner "$1" 2>/dev/null | grep -q true; }
until has org.freedesktop.PolicyKit1 && has net.reactivated.Fprint; do sleep 0.01; done
echo "ready after $(( ($(date +%s%N)-t0)/1000000 )) ms (bus=$BUS polkitd=$PK fprintd=$FP)"
feed() { /usr/bin/python3 /tmp/fprintd-lab/fpvirt.py "$D/fp.sock" "$@" >/dev/null; }
fprintd-enroll -f right-index-finger root & E=$!; feed "SCAN p1" "SCAN p1" "SCAN p1" "SCAN p1" "SCAN p1"; wait $E; echo "enroll rc=$?"
# NB: fprintd-verify ignores VerifyStatus signals that arrive before the VerifyStart reply, so feed the
# SCAN only after it printed "Verify started!" (a pre-queued SCAN can make it hang for ever).
verify_cli() { rm -f "$D/v.out"; fprintd-verify root >"$D/v.out" 2>&1 & V=$!
  until grep -q "Verify started" "$D/v.out" 2>/dev/null; do sleep 0.01; done; feed "SCAN $1"; wait $V; local rc=$?; grep "Verify result" "$D/v.out"; return $rc; }
verify_cli p1; echo "fprintd-verify (match) rc=$?"
verify_cli p2; echo "fprintd-verify (no-match) rc=$?"
/tmp/fprintd-lab/c/gdbus_verify & V=$!; feed "SCAN p1"; wait $V; echo "gdbus_verify (match, SCAN fed concurrently) rc=$?"
/tmp/fprintd-lab/c/sdbus_verify & V=$!; feed "SCAN p2"; wait $V; echo "sdbus_verify (no-match, SCAN fed concurrently) rc=$?"
FPSOCK=$D/fp.sock /usr/bin/python3 /tmp/fprintd-lab/t11.py
find "$D/state" -type f
kill $FP $PK $BUS; wait $FP $PK $BUS 2>/dev/null; echo "stopped"
