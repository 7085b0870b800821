import CRawSQLite
import EmbeddedEngine
import Foundation
import KeychainStore
import SecurityClient
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Instructions per lookup, counted by callgrind (repeatable on a shared machine where times are not): a find by
/// primary key with data returned, on a store of 1,000 generic passwords, through the embedded engine and through
/// the SQLite C API with a prepared statement (the keychain section's raw side). Each side runs in a child
/// `la-bench lookup-loop SIDE DIRECTORY COUNT` under `valgrind --tool=callgrind --collect-atstart=no`, which opens
/// the store (made natively first), warms up with 200 lookups and collects only while it does COUNT more; the
/// total over COUNT is the cost of one lookup. Then the functions that cost the most in our lookup, by their own
/// instructions (callgrind_annotate).
enum CallgrindBenchmarks {
    static let items = 1_000
    static let lookups = 2_000

    static func run() async throws {
        print("== keychain lookup under callgrind: instructions per find by primary key (1k items)")
        let tools = ["/usr/bin/valgrind", "/usr/bin/objcopy", "/usr/bin/callgrind_annotate"]
        guard tools.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("callgrind: skipped, \(tools.filter { !FileManager.default.isExecutableFile(atPath: $0) }) missing")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-callgrind-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let engineDirectory = directory.appendingPathComponent("engine")
        try fill(engineDirectory)
        var sizes = (attributes: 0, wrappedKey: 0, value: 0)
        _ = raw_sqlite_row_sizes(
            engineDirectory.appendingPathComponent(KeychainDatabase.fileName).path, &sizes.attributes,
            &sizes.wrappedKey, &sizes.value)
        let rawDirectory = directory.appendingPathComponent("raw")
        try FileManager.default.createDirectory(at: rawDirectory, withIntermediateDirectories: true)
        var raw: OpaquePointer?
        guard
            raw_sqlite_open(rawDirectory.path + "/keychain.db", sizes.attributes, sizes.wrappedKey, sizes.value, &raw)
                == 0
        else { throw CallgrindFailure("the raw store did not open") }
        for index in 0..<items { _ = raw_sqlite_insert(raw, Int64(index)) }
        raw_sqlite_close(raw)

        let executable = BenchDaemon.strippedCopy(of: CommandLine.arguments[0], in: directory)
        var perLookup: [String: Double] = [:]
        for (side, store) in [("engine", engineDirectory), ("codec", engineDirectory), ("raw-c", rawDirectory)] {
            let output = directory.appendingPathComponent("callgrind-\(side).out").path
            guard
                Measure.run(
                    "/usr/bin/valgrind",
                    [
                        "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=\(output)", executable,
                        "lookup-loop", side, store.path, "\(lookups)",
                    ]) != nil,
                let total = totalInstructions(output)
            else { throw CallgrindFailure("valgrind did not finish the \(side) run") }
            perLookup[side] = total / Double(lookups)
            if side == "engine" {
                print("instructions of one embedded lookup, by function (own cost, share of the lookups):")
                let annotated = Measure.run("/usr/bin/callgrind_annotate", ["--threshold=100", output]) ?? ""
                for line in topFunctions(annotated, count: 15) { print("  \(line)") }
                if let keep = ProcessInfo.processInfo.environment["LA_BENCH_CALLGRIND_KEEP"] {
                    try? FileManager.default.copyItem(atPath: output, toPath: keep)
                }
            }
        }
        if let ours = perLookup["engine"], let rawC = perLookup["raw-c"] {
            print(
                String(
                    format: "keychain lookup instructions: embedded %.0f, raw C SQLite %.0f per lookup, %.1fx", ours,
                    rawC,
                    ours / rawC))
        }
        if let codec = perLookup["codec"] {
            print(
                String(
                    format:
                        "lane messages of one lookup through localauthd (request and answer, encoded and decoded): %.0f instructions",
                    codec))
        }
    }

    /// An embedded store in `directory` with the 1,000 generic passwords the lookups find.
    static func fill(_ directory: URL) throws {
        try fill(
            EmbeddedClient(configuration: EmbeddedConfiguration(dataDirectory: directory, accessGroups: ["bench"])))
    }

    /// Adds the 1,000 generic passwords the lookups find.
    private static func fill(_ client: any SecurityClient) throws {
        for index in 0..<items {
            _ = try client.sendBlocking(
                .add([
                    "class": .string("genp"), "svce": .string("bench"), "acct": .string("account-\(index)"),
                    "labl": .string("item \(index)"), "v_Data": .data(Data("correct horse battery staple".utf8)),
                ]))
        }
    }

    /// One find by primary key of a random item, its data returned.
    private static func lookUp(_ client: any SecurityClient, _ random: inout KeychainBenchmarks.Random) throws {
        let query: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("bench"),
            "acct": .string("account-\(random.next(below: items))"), "r_Data": .bool(true),
        ]
        guard case .items(let found) = try client.sendBlocking(.copyMatching(query)), found.items.count == 1
        else { throw CallgrindFailure("an item is missing") }
    }

    /// The child: opens the store made by `run` and looks up `count` items. Also by hand, for other profilers:
    /// `la-bench lookup-loop fill DIRECTORY 0` makes an embedded store, `la-bench lookup-loop engine DIRECTORY
    /// 20000` under `strace -c` or `perf stat` looks up in it, and `la-bench lookup-loop daemon SOCKET 20000` does
    /// the same through a running localauthd (adding the items first when they are missing) for `strace -c -f -p`
    /// or `perf record` on the daemon (BENCHMARKS.md).
    static func loop(_ arguments: [String]) throws {
        guard arguments.count == 3, let count = Int(arguments[2]) else {
            throw CallgrindFailure(
                "usage: la-bench lookup-loop fill|engine|codec|raw-c|daemon DIRECTORY-OR-SOCKET COUNT")
        }
        let store = URL(fileURLWithPath: arguments[1])
        var random = KeychainBenchmarks.Random(seed: 7)
        switch arguments[0] {
        case "fill":
            try fill(store)
        case "engine":
            let client = try EmbeddedClient(
                configuration: EmbeddedConfiguration(dataDirectory: store, accessGroups: ["bench"]))
            for round in 0..<(200 + count) {
                if round == 200 { raw_callgrind_toggle_collect() }
                try lookUp(client, &random)
            }
            raw_callgrind_toggle_collect()
        case "daemon":
            let client = try SocketClient(path: arguments[1], accessGroups: ["la-bench"])
            let filled = try? client.sendBlocking(
                .copyMatching(["class": .string("genp"), "svce": .string("bench"), "acct": .string("account-0")]))
            if filled == nil { try fill(client) }
            print("ready")
            if let pause = ProcessInfo.processInfo.environment["LA_BENCH_PAUSE"].flatMap(Double.init) {
                usleep(UInt32(pause * 1e6))
            }
            for _ in 0..<count { try lookUp(client, &random) }
        case "codec":
            // What a lookup through localauthd's lane costs in messages, both sides: the client encodes the request
            // and decodes the answer, the daemon decodes the request and encodes the answer (the answer taken from
            // a real lookup in the store at DIRECTORY).
            let client = try EmbeddedClient(
                configuration: EmbeddedConfiguration(dataDirectory: store, accessGroups: ["bench"]))
            let query: [String: KeychainValue] = [
                "class": .string("genp"), "svce": .string("bench"), "acct": .string("account-1"), "r_Data": .bool(true),
            ]
            let answer = ServerMessage.keychain(1, try client.sendBlocking(.copyMatching(query)))
            for round in 0..<(200 + count) {
                if round == 200 { raw_callgrind_toggle_collect() }
                let request = ClientMessage.keychain(
                    UInt64(round), .copyMatching(query), .nonInteractive, interactive: false
                ).encoded()
                guard case .keychain = try ClientMessage(decoding: request),
                    case .keychain = try ServerMessage(decoding: answer.encoded())
                else { throw CallgrindFailure("the codec lost a message") }
            }
            raw_callgrind_toggle_collect()
        case "raw-c":
            var raw: OpaquePointer?
            guard raw_sqlite_open(store.path + "/keychain.db", 0, 0, 0, &raw) == 0 else {
                throw CallgrindFailure("the raw store did not open")
            }
            defer { raw_sqlite_close(raw) }
            for round in 0..<(200 + count) {
                if round == 200 { raw_callgrind_toggle_collect() }
                guard raw_sqlite_find(raw, Int64(random.next(below: items))) == 100 else {
                    throw CallgrindFailure("a row is missing")
                }
            }
            raw_callgrind_toggle_collect()
        default:
            throw CallgrindFailure("unknown side \(arguments[0])")
        }
    }

    /// The `totals:` (or `summary:`) line of a callgrind output file.
    private static func totalInstructions(_ path: String) -> Double? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("totals:") || line.hasPrefix("summary:") {
            return Double(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    /// The first `count` function lines of callgrind_annotate's output (instructions, percentage, function),
    /// shortened.
    private static func topFunctions(_ annotated: String, count: Int) -> [String] {
        annotated.split(separator: "\n")
            .filter { $0.contains("(") && $0.contains(":") && $0.first(where: { !$0.isWhitespace })?.isNumber == true }
            .prefix(count)
            .map { line in line.count > 160 ? String(line.prefix(157)) + "..." : String(line) }
    }

    struct CallgrindFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
