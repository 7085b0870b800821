import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl secret-service` (embedded, on a store of its own) against gnome-keyring-daemon (its `secrets` component,
/// a login keyring unlocked at start), each on a private session bus of its own in the same run: lookups per second of
/// one Python `secretstorage` client (search by attribute, then the secret, over an encrypted session: what
/// `keyring.get_password` does), and the median time of a whole `secret-tool lookup` (a process start, a session,
/// a search, the secret). The same item each time, made by the program that reads it. Target: ratio >= 1.5 for
/// the loop (both pay D-Bus; the keychain underneath is far faster).
enum SecretServiceBenchmarks {
    static let script = """
        set -u
        case "$PROVIDER" in
            ours) "$LACTL" secret-service 2>"$WORK/provider.log" & ;;
            gnome-keyring) printf benchpass | gnome-keyring-daemon --unlock --components=secrets --foreground \\
                >"$WORK/provider.log" 2>&1 & ;;
        esac
        provider=$!
        trap 'kill $provider 2>/dev/null' EXIT
        for _ in $(seq 600); do
            gdbus call --session --dest org.freedesktop.DBus --object-path / \\
                --method org.freedesktop.DBus.NameHasOwner org.freedesktop.secrets 2>/dev/null | grep -q true && break
            sleep 0.05
        done
        /usr/bin/python3 - <<'PY' || exit 1
        import subprocess, statistics, time, secretstorage
        connection = secretstorage.dbus_init()
        collection = secretstorage.get_default_collection(connection)
        collection.create_item("bench", {"bench": "loop"}, b"bench-secret", replace=True)
        def once():
            item = next(collection.search_items({"bench": "loop"}))
            assert item.get_secret() == b"bench-secret"
        for _ in range(50):
            once()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < 3:
            once()
            count += 1
        print("loop", count / (time.perf_counter() - start), flush=True)
        subprocess.run(["secret-tool", "store", "--label=bench", "bench", "tool"], input=b"tool-secret", check=True)
        times = []
        for _ in range(40):
            started = time.perf_counter()
            found = subprocess.run(["secret-tool", "lookup", "bench", "tool"], capture_output=True, check=True)
            times.append(time.perf_counter() - started)
            assert found.stdout == b"tool-secret"
        print("lookup-ms", statistics.median(times) * 1000, flush=True)
        PY
        """

    static func run() async throws {
        print("== Secret Service: lactl secret-service vs gnome-keyring-daemon on a private bus (target ratio >= 1.5)")
        let tools = [
            "/usr/bin/dbus-run-session", "/usr/bin/gdbus", "/usr/bin/secret-tool", "/usr/bin/gnome-keyring-daemon",
            "/usr/bin/python3",
        ]
        let lactl = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("lactl").path
        guard tools.allSatisfy(FileManager.default.isExecutableFile(atPath:)),
            FileManager.default.isExecutableFile(atPath: lactl),
            Measure.run("/usr/bin/python3", ["-c", "import secretstorage"]) != nil
        else {
            print(
                "secret-service: not measured: needs dbus, libsecret-tools, gnome-keyring, python3-secretstorage, lactl"
            )
            return
        }
        // Three rounds, the two providers alternating: on a shared machine the load drifts, and a drift then falls
        // on both alike; each figure is its provider's median.
        var results: [String: (loops: [Double], lookups: [Double])] = [:]
        for _ in 0..<3 {
            for provider in ["gnome-keyring", "ours"] {
                guard let (loop, lookup) = try measure(provider, lactl: lactl) else { return }
                results[provider, default: ([], [])].loops.append(loop)
                results[provider, default: ([], [])].lookups.append(lookup)
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        guard let ours = results["ours"], let theirs = results["gnome-keyring"] else { return }
        Measure.report(
            "secret-service lookups (secretstorage, search and secret; median of 3 rounds)",
            ours: median(ours.loops), baseline: median(theirs.loops), baselineName: "gnome-keyring", target: ">= 1.5")
        print(
            String(
                format:
                    "secret-tool lookup, whole process (median of 3 rounds of 40): ours %.1f ms, gnome-keyring %.1f ms, "
                    + "ratio %.2f", median(ours.lookups), median(theirs.lookups),
                median(theirs.lookups) / median(ours.lookups)))
    }

    /// One round of `provider` ("ours" or "gnome-keyring") on a private bus: its loop rate and its lookup time; nil
    /// (said why) when it could not be measured.
    private static func measure(_ provider: String, lactl: String) throws -> (loop: Double, lookup: Double)? {
        let directory = try AuthenticatorBenchmarks.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bench.sh"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let environment = [
            "PATH=/usr/bin:/bin", "PROVIDER=\(provider)", "LACTL=\(lactl)", "WORK=\(directory)",
            "HOME=\(directory)", "XDG_DATA_HOME=\(directory)/data", "XDG_RUNTIME_DIR=\(directory)",
            "LA_DATA_DIR=\(directory)/store", "LA_PRESENTER=none", "PYTHONDONTWRITEBYTECODE=1",
        ]
        guard
            let output = Measure.run(
                "/usr/bin/env", ["-i"] + environment + ["/usr/bin/dbus-run-session", "--", "/bin/bash", path])
        else {
            let log = (try? String(contentsOfFile: directory + "/provider.log", encoding: .utf8)) ?? ""
            print("secret-service: \(provider) could not be measured: \(log.prefix(300))")
            return nil
        }
        func value(_ key: String) -> Double? {
            output.split(separator: "\n").first { $0.hasPrefix(key + " ") }
                .flatMap { Double($0.dropFirst(key.count + 1)) }
        }
        guard let loop = value("loop"), let lookup = value("lookup-ms") else {
            print("secret-service: \(provider) printed no figures: \(output.prefix(300))")
            return nil
        }
        return (loop, lookup)
    }
}
