import CRawSQLite
import EmbeddedEngine
import Foundation
import KeychainStore
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization

/// The keychain engine (encrypted rows, blind index, two AES-256-GCM layers), embedded and through a localauthd
/// started for the run, against the same SQLite table through the C API with prepared statements and rows of the
/// engine's sizes and no crypto (the honest floor), and against the same statements through GRDB (the earlier
/// baseline, kept for continuity), at 1k, 10k and 100k items; and lookups against `secret-tool` on a gnome-keyring
/// daemon started for the run, when those packages are installed.
enum KeychainBenchmarks {
    private static let sizes = (ProcessInfo.processInfo.environment["LA_BENCH_SIZES"] ?? "1000,10000,100000")
        .split(separator: ",").compactMap { Int($0) }
    private static let secret = Data("correct horse battery staple".utf8)

    static func run() async throws {
        print(
            "== keychain: the engine (embedded, and through localauthd) vs the SQLite C API with the same table, "
                + "row sizes and prepared statements, no crypto (same run; the GRDB baseline kept for continuity)")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-keychain-\(getpid())")
        defer { try? FileManager.default.removeItem(at: root) }
        let daemon = BenchDaemon.start(in: root.appendingPathComponent("daemon"))
        defer { daemon?.stop() }
        // The transport's floor on this machine: a C round trip between two processes over a Unix socket.
        let peerRoundTrip = raw_unix_round_trip_ns(5_000, 160, 120, 0) / 1e9
        if peerRoundTrip > 0 {
            print(
                String(
                    format: "transport floor: C round trip between two processes over a Unix socket %.1f µs (median)",
                    peerRoundTrip * 1e6))
        }
        // The physical floor: the same with both sides polling, so no wake-up is paid.
        let spinningRoundTrip = raw_unix_round_trip_ns(5_000, 160, 120, 1) / 1e9
        if spinningRoundTrip > 0 {
            print(
                String(
                    format: "transport floor, both sides polling (no wake-up): %.1f µs (median)",
                    spinningRoundTrip * 1e6))
        }
        var findAtSize: [Int: Double] = [:]
        for size in sizes {
            let label = "\(size / 1000)k"
            let directory = root.appendingPathComponent("engine-\(size)")
            let engine = try EngineSide(
                client: EmbeddedClient(
                    configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: ["bench"])),
                size: size, service: "bench")
            let throughDaemon = try daemon.map {
                try EngineSide(client: $0.client, size: size, service: "bench-\(size)")
            }
            let rawC = try RawCSide(
                size: size, directory: root.appendingPathComponent("raw-c-\(size)"),
                sizesLike: directory.appendingPathComponent(KeychainDatabase.fileName).path)
            let grdb = try RawSide(size: size, directory: root.appendingPathComponent("raw-\(size)"))
            // Lookups and updates alternate between the sides in short slices, so load from anything else on
            // the machine falls on every side alike.
            let finds = try alternate(
                seconds: 4, [engine.find, rawC.find, grdb.find] + (throughDaemon.map { [$0.find] } ?? []))
            let updates = try alternate(
                seconds: 3, [engine.update, rawC.update, grdb.update] + (throughDaemon.map { [$0.update] } ?? []))
            let deletes = try [
                engine.deleteSome(), rawC.deleteSome(), grdb.deleteSome(), throughDaemon?.deleteSome() ?? 0,
            ]
            findAtSize[size] = finds[0]
            let adds = [engine.addRate, rawC.addRate, grdb.addRate, throughDaemon?.addRate ?? 0]
            for (operation, rates) in [
                ("add", adds), ("find-by-primary-key", finds), ("update", updates), ("delete", deletes),
            ] {
                let isFind = operation == "find-by-primary-key"
                Measure.report(
                    "keychain \(operation) @\(label), embedded", ours: rates[0], baseline: rates[1],
                    baselineName: "raw C SQLite", target: isFind ? ">= 0.5" : nil)
                if throughDaemon != nil {
                    Measure.report(
                        "keychain \(operation) @\(label), through localauthd", ours: rates[3], baseline: rates[1],
                        baselineName: "raw C SQLite", target: isFind ? ">= 0.25" : nil)
                }
                Measure.report(
                    "keychain \(operation) @\(label), embedded vs GRDB baseline", ours: rates[0], baseline: rates[2],
                    baselineName: "GRDB, no crypto")
            }
            if finds.count > 3, peerRoundTrip > 0 {
                let floor = 1 / finds[1] + peerRoundTrip
                print(
                    String(
                        format:
                            "keychain find @%@ through localauthd vs the floor (raw C SQLite lookup + C socket round trip, "
                            + "%.1f µs): ratio %.2f", label, floor * 1e6, floor * finds[3]))
            }
            print(
                String(
                    format: "keychain find @%@: embedded %.1f µs, raw C SQLite %.1f µs, GRDB %.1f µs%@", label,
                    1e6 / finds[0], 1e6 / finds[1], 1e6 / finds[2],
                    finds.count > 3 ? String(format: ", through localauthd %.1f µs", 1e6 / finds[3]) : ""))
        }
        if daemon == nil { print("keychain through localauthd: skipped (see above)") }
        if let small = findAtSize[1_000], let large = findAtSize[100_000] {
            print(
                "keychain lookup time 100k vs 1k: \(String(format: "%.2f", small / large))x (target <= 2x; "
                    + "\(String(format: "%.1f", 1e6 / small)) µs at 1k, \(String(format: "%.1f", 1e6 / large)) µs at 100k)"
            )
        }
        try compareWithSecretTool(findAt1k: findAtSize[1_000] ?? 0, directory: root.appendingPathComponent("engine-st"))
    }

    // MARK: Ours

    private static func query(_ index: Int, service: String) -> [String: KeychainValue] {
        ["class": .string("genp"), "svce": .string(service), "acct": .string("account-\(index)")]
    }

    /// The engine through a client, embedded or localauthd's: what `SecItemCopyMatching` and friends run.
    final class EngineSide {
        let client: any SecurityClient
        let size: Int
        let service: String
        var addRate = 0.0
        var random = Random(seed: 1)

        init(client: any SecurityClient, size: Int, service: String) throws {
            self.client = client
            self.size = size
            self.service = service
            let start = ContinuousClock.now
            for index in 0..<size {
                var item = query(index, service: service)
                item["labl"] = .string("item \(index)")
                item["v_Data"] = .data(secret)
                _ = try client.sendBlocking(.add(item))
            }
            addRate = Double(size) / seconds(since: start)
        }

        func find() throws {
            // One literal, as a caller writes a query (a fourth key added to a three-key dictionary grows it first).
            let find: [String: KeychainValue] = [
                "class": .string("genp"), "svce": .string(service),
                "acct": .string("account-\(random.next(below: size))"), "r_Data": .bool(true),
            ]
            guard case .items(let results) = try client.sendBlocking(.copyMatching(find)), results.items.count == 1
            else {
                throw BenchmarkFailure.wrongResult
            }
        }

        func update() throws {
            _ = try client.sendBlocking(
                .update(query: query(random.next(below: size), service: service), attributes: ["v_Data": .data(secret)])
            )
        }

        func deleteSome() throws -> Double {
            try deletionRate(size) { _ = try client.sendBlocking(.delete(query($0, service: service))) }
        }
    }

    // MARK: Raw SQLite through the C API

    /// The engine's table, indexes and connection settings (WAL, synchronous=FULL, secure_delete) through the
    /// SQLite C API with statements prepared once: each lookup binds a 32-byte key, steps, reads every column and
    /// copies the value out, as the engine's lookup reads its row. Rows have the blob sizes of the engine's rows.
    final class RawCSide {
        let handle: OpaquePointer
        let size: Int
        var addRate = 0.0
        var random = Random(seed: 1)

        init(size: Int, directory: URL, sizesLike enginePath: String) throws {
            self.size = size
            var sizes = (attributes: 0, wrappedKey: 0, value: 0)
            guard raw_sqlite_row_sizes(enginePath, &sizes.attributes, &sizes.wrappedKey, &sizes.value) == SQLITE_OK_CODE
            else { throw BenchmarkFailure.wrongResult }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var opened: OpaquePointer?
            guard
                raw_sqlite_open(
                    directory.appendingPathComponent("keychain.db").path, sizes.attributes, sizes.wrappedKey,
                    sizes.value, &opened) == SQLITE_OK_CODE, let opened
            else { throw BenchmarkFailure.wrongResult }
            handle = opened
            let start = ContinuousClock.now
            for index in 0..<size where raw_sqlite_insert(handle, Int64(index)) != SQLITE_DONE_CODE {
                throw BenchmarkFailure.wrongResult
            }
            addRate = Double(size) / seconds(since: start)
        }

        deinit { raw_sqlite_close(handle) }

        func find() throws {
            guard raw_sqlite_find(handle, Int64(random.next(below: size))) == SQLITE_ROW_CODE else {
                throw BenchmarkFailure.wrongResult
            }
        }

        func update() throws {
            guard raw_sqlite_update(handle, Int64(random.next(below: size))) == SQLITE_DONE_CODE else {
                throw BenchmarkFailure.wrongResult
            }
        }

        func deleteSome() throws -> Double {
            try deletionRate(size) { index in
                guard raw_sqlite_delete(handle, Int64(index)) == SQLITE_DONE_CODE else {
                    throw BenchmarkFailure.wrongResult
                }
            }
        }
    }

    // MARK: Raw SQLite through GRDB, same schema and statements, no crypto (the baseline before the C one)

    /// The same table, indexes, connection settings and statements through GRDB (`KeychainDatabase`), with values
    /// and attributes in clear and the primary key itself as the unique index.
    final class RawSide {
        let database: KeychainDatabase
        let size: Int
        var addRate = 0.0
        var random = Random(seed: 1)

        init(size: Int, directory: URL) throws {
            self.size = size
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            database = try KeychainDatabase(directory: directory)
            let start = ContinuousClock.now
            for index in 0..<size {
                try database.write { transaction in
                    try transaction.insert(Self.row(index, rowID: try transaction.nextRowID()))
                }
            }
            addRate = Double(size) / seconds(since: start)
        }

        static func row(_ index: Int, rowID: Int64) -> StoredItem {
            let attributes = AttributeCodec.encode([
                "acct": .string("account-\(index)"), "svce": .string("bench"), "labl": .string("item \(index)"),
            ])
            return StoredItem(
                rowID: rowID, itemClass: "genp", accessGroup: "bench", protectionClass: "ak", synchronizable: false,
                blindIndex: key(index), attributes: attributes, wrappedKey: Data(count: 60), value: secret)
        }

        static func key(_ index: Int) -> Data { Data("bench/account-\(index)".utf8) }

        func find() throws {
            let index = random.next(below: size)
            let found = try database.read { transaction -> Data? in
                try transaction.items(blindIndexes: [Self.key(index)], includingValues: true).first?.value
            }
            guard found != nil else { throw BenchmarkFailure.wrongResult }
        }

        func update() throws {
            let index = random.next(below: size)
            try database.write { transaction in
                guard var row = try transaction.items(blindIndexes: [Self.key(index)]).first else {
                    throw BenchmarkFailure.wrongResult
                }
                row.value = secret
                try transaction.update(row)
            }
        }

        func deleteSome() throws -> Double {
            try deletionRate(size) { index in
                try database.write { transaction in
                    for row in try transaction.items(blindIndexes: [Self.key(index)]) {
                        try transaction.delete(rowID: row.rowID)
                    }
                }
            }
        }
    }

    /// Operations per second of each side, run in alternating slices for `seconds` in total.
    private static func alternate(seconds total: Double, _ sides: [() throws -> Void]) throws -> [Double] {
        for _ in 0..<50 {
            for side in sides { try side() }
        }
        let rounds = 10
        let slice = Duration.milliseconds(Int(total * 1000) / (sides.count * rounds))
        var counts = Array(repeating: 0, count: sides.count)
        var elapsed = Array(repeating: 0.0, count: sides.count)
        for _ in 0..<rounds {
            for (index, side) in sides.enumerated() {
                let start = ContinuousClock.now
                var done = 0
                repeat {
                    for _ in 0..<10 { try side() }
                    done += 10
                } while ContinuousClock.now - start < slice
                counts[index] += done
                elapsed[index] += Self.seconds(since: start)
            }
        }
        return zip(counts, elapsed).map { Double($0) / $1 }
    }

    // MARK: secret-tool on gnome-keyring

    static func compareWithSecretTool(
        findAt1k: Double, directory: URL, label: String = "keychain find vs secret-tool lookup"
    ) throws {
        let tools = [
            "/usr/bin/secret-tool", "/usr/bin/gnome-keyring-daemon", "/usr/bin/dbus-launch", "/usr/bin/dbus-send",
        ]
        guard tools.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else {
            print(
                "\(label): skipped, \(tools.filter { !FileManager.default.isExecutableFile(atPath: $0) }.joined(separator: ", ")) missing "
                    + "(apt-get install gnome-keyring libsecret-tools dbus-x11)")
            return
        }
        let home = directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let script = home.appendingPathComponent("run.sh")
        // The bus and the keyring daemon are stopped with SIGKILL: a process started from a thread that blocks
        // signals (as thread-pool threads do) inherits that mask, and would ignore SIGTERM.
        try """
        set -e
        export HOME="$1" XDG_DATA_HOME="$1/data" XDG_RUNTIME_DIR="$1/run" XDG_CONFIG_HOME="$1/config"
        mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
        eval "$(dbus-launch --sh-syntax </dev/null 2>/dev/null)"
        printf 'la-bench' | gnome-keyring-daemon --unlock --components=secrets --foreground >/dev/null 2>&1 &
        daemon=$!
        trap 'kill -9 $daemon $DBUS_SESSION_BUS_PID 2>/dev/null || true' EXIT
        n=0
        until dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \\
            org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true; do
          n=$((n+1)); if [ $n -gt 200 ]; then echo "gnome-keyring did not claim org.freedesktop.secrets" >&2; exit 3; fi
          sleep 0.05
        done
        N=$2; L=$3
        i=1; while [ $i -le $N ]; do printf 'correct horse battery staple' | timeout 10 secret-tool store --label="bench $i" service la-bench account "account-$i"; i=$((i+1)); done
        start=$(date +%s%N)
        i=0; while [ $i -lt $L ]; do timeout 10 secret-tool lookup service la-bench account "account-$((i % N + 1))" >/dev/null; i=$((i+1)); done
        end=$(date +%s%N)
        echo "lookups $L $((end-start))"
        """.write(to: script, atomically: true, encoding: .utf8)
        let lookups = 200
        var nanoseconds: Double?
        var failure = "gnome-keyring did not start"
        // One retry, in case the session bus or the keyring daemon is slow to come up.
        for attempt in 0..<2 where nanoseconds == nil {
            try? FileManager.default.removeItem(at: home.appendingPathComponent("data"))
            try? FileManager.default.removeItem(at: home.appendingPathComponent("run"))
            let (status, output, errors) = runCapturing(
                "/usr/bin/timeout", ["120", "/bin/sh", script.path, home.path, "100", "\(lookups)"])
            if status == 0, let line = output.split(separator: "\n").first(where: { $0.hasPrefix("lookups ") }) {
                nanoseconds = Double(line.split(separator: " ")[2])
            } else {
                let reason = errors.split(separator: "\n").last { !$0.hasPrefix("dbus-daemon") }
                failure = "attempt \(attempt + 1) exited \(status)" + (reason.map { ": \($0)" } ?? "")
            }
        }
        guard let nanoseconds else {
            print("\(label): skipped, \(failure)")
            return
        }
        let secretToolOps = Double(lookups) / (nanoseconds / 1e9)
        Measure.report(
            "\(label) (process + D-Bus, 100 items)", ours: findAt1k,
            baseline: secretToolOps, baselineName: "secret-tool", target: ">= 20")
    }

    // MARK: Helpers

    /// Runs a command; its exit status, standard output and standard error.
    private static func runCapturing(_ executable: String, _ arguments: [String]) -> (Int32, String, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do { try process.run() } catch { return (-1, "", "\(error)") }
        // Drain standard error on another thread so neither pipe fills up and blocks the command.
        let errorText = ErrorCollector()
        let reader = Thread { errorText.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // A daemon started by the command may hold standard error open; give the reader two seconds, no more.
        for _ in 0..<2000 where !errorText.isSet { usleep(1000) }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self), errorText.text)
    }

    /// Standard error collected on a reader thread.
    private final class ErrorCollector: Sendable {
        private let storage = Mutex<Data?>(nil)

        func set(_ data: Data) { storage.withLock { $0 = data } }

        var isSet: Bool { storage.withLock { $0 != nil } }

        var text: String { String(decoding: storage.withLock { $0 } ?? Data(), as: UTF8.self) }
    }

    // SQLite's result codes, as the C side returns them (sqlite3.h is not imported into Swift here).
    private static let SQLITE_OK_CODE: Int32 = 0
    private static let SQLITE_ROW_CODE: Int32 = 100
    private static let SQLITE_DONE_CODE: Int32 = 101

    private enum BenchmarkFailure: Error {
        case wrongResult
    }

    /// Deletions per second of items 0, 1, … (a fifth of a store of `size`, at most 2,000), each by `delete`.
    private static func deletionRate(_ size: Int, _ delete: (Int) throws -> Void) rethrows -> Double {
        let deletions = min(size / 5, 2_000)
        let start = ContinuousClock.now
        for index in 0..<deletions { try delete(index) }
        return Double(deletions) / seconds(since: start)
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = start.duration(to: .now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// A small deterministic generator (SplitMix64), so both sides look up the same sequence of items.
    struct Random {
        var state: UInt64

        init(seed: UInt64) { state = seed }

        mutating func next(below bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }
}
