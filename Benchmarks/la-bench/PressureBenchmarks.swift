import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer
import SecurityTransport

#if canImport(Glibc)
    import Glibc
#endif

/// One user's lookup while another user floods localauthd (issue 35): the victim's find latency, quiet and then
/// during the flood, from the same process against the same daemon in one run. The flood runs as uid 65534 (a copy
/// of la-bench started with `setpriv`, `la-bench flood SOCKET`): four connections sending lookups back to back, one
/// connection after another that never says hello (up to the per-user cap), and connections each declaring a 60 MiB
/// frame and sending all of it but its last byte. Target: the victim's median within 10× its quiet median.
enum PressureBenchmarks {
    static let floodingUser: uid_t = 65_534

    static func run() async throws {
        print("== localauthd under another user's flood: a victim's lookup, quiet and flooded (same run)")
        guard getuid() == 0 else {
            print("pressure: skipped, needs root to start the flood as another user")
            return
        }
        let directory = URL(fileURLWithPath: try AuthenticatorBenchmarks.makeTemporaryDirectory())
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(directory.path, 0o755)
        guard let started = BenchDaemon.start(in: directory) else { return }
        defer { started.stop() }
        let victim = started.client
        let items = 1_000
        for index in 0..<items {
            _ = try victim.sendBlocking(
                .add([
                    "class": .string("genp"), "svce": .string("la-bench"), "acct": .string("account-\(index)"),
                    "v_Data": .secret(SecureBytes(Array("correct horse battery staple".utf8))),
                ]))
        }
        func find(_ index: Int) throws {
            guard
                case .items(let found) = try victim.sendBlocking(
                    .copyMatching([
                        "class": .string("genp"), "svce": .string("la-bench"),
                        "acct": .string("account-\(index % items)"), "r_Data": .bool(true),
                    ])), found.items.count == 1
            else { throw KeychainStatus(.itemNotFound, "la-bench: an item is missing") }
        }
        let quiet = try latencies(count: 5_000, find)

        let log = directory.appendingPathComponent("flood.log").path
        let socket = directory.path + "/localauthd.sock"
        guard let pid = try Measure.spawnCopy(asUser: floodingUser, in: directory, ["flood", socket], log: log) else {
            print("pressure: skipped, setpriv did not start the flood")
            return
        }
        defer { Measure.stop(pid) }
        // The flood is under way once each of its parts reported in.
        let report = Measure.report(in: log, containing: "flooding")
        guard report.found else {
            print("pressure: skipped, the flood did not start: \(report.text)")
            return
        }
        // Past the hello timeout (5 s), so that the silent connections are closed and opened again meanwhile.
        sleep(6)
        let flooded = try latencies(count: 5_000, find)
        kill(pid, SIGUSR1)
        usleep(200_000)
        let served = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        func us(_ seconds: Double) -> String { String(format: "%.1f µs", seconds * 1e6) }
        print(
            "victim find, quiet: median \(us(quiet.median)), p99 \(us(quiet.p99)); during another user's flood: median "
                + "\(us(flooded.median)), p99 \(us(flooded.p99)); flooded/quiet median "
                + String(format: "%.2fx", flooded.median / quiet.median) + ", p99 "
                + String(format: "%.2fx", flooded.p99 / quiet.p99) + " (target <= 10x median)")
        print("the flood: " + served.split(separator: "\n").filter { $0.contains("=") }.joined(separator: ", "))
    }

    /// Times `count` single calls of `body` after 200 unmeasured ones.
    static func latencies(count: Int, _ body: (Int) throws -> Void) rethrows -> DaemonBenchmarks.Latencies {
        for index in 0..<200 { try body(index) }
        var times: [Double] = []
        times.reserveCapacity(count)
        for index in 0..<count {
            let start = ContinuousClock.now
            try body(index)
            let elapsed = ContinuousClock.now - start
            times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        return DaemonBenchmarks.Latencies(sorted: times.sorted())
    }

    /// The flooding child (`la-bench flood SOCKET`, as another user): starts each part of the flood on its own
    /// thread, prints `flooding` once all run, and on SIGUSR1 prints how much of each it got through and exits.
    static func flood(socket path: String) -> Never {
        let lookups = FloodCounter(0)
        let silent = FloodCounter(0)
        let framed = FloodCounter(0)
        let refused = FloodCounter(0)
        var threads: [Thread] = []
        for _ in 0..<4 {
            threads.append(
                Thread {
                    while true {
                        guard let client = try? SocketClient(path: path, accessGroups: []) else {
                            refused.add(1)
                            usleep(10_000)
                            continue
                        }
                        var index = 0
                        while true {
                            index += 1
                            do {
                                _ = try client.sendBlocking(
                                    .copyMatching(["class": .string("genp"), "acct": .string("absent-\(index)")]))
                            } catch let status as KeychainStatus where status.code == .itemNotFound {
                            } catch {
                                break
                            }
                            lookups.add(1)
                        }
                    }
                })
        }
        // Connections that never say hello, kept open up to 100 (the per-user cap is 128, leaving room for the other parts); the daemon closes each after its hello timeout.
        threads.append(
            Thread {
                var open: [Int32] = []
                while true {
                    open.removeAll { descriptor in
                        var peek: UInt8 = 0
                        let count = recv(descriptor, &peek, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
                        // Anything to read (the refusal before the close), the end, or an error: it is over.
                        guard count >= 0 || errno != EAGAIN else { return false }
                        close(descriptor)
                        return true
                    }
                    while open.count < 100, let descriptor = connected(path) {
                        open.append(descriptor)
                        silent.add(1)
                    }
                    usleep(100_000)
                }
            })
        // Connections each declaring a 60 MiB frame and sending all of it but the last byte.
        threads.append(
            Thread {
                let chunk = [UInt8](repeating: 0x41, count: 1 << 20)
                let bytes = 60 << 20
                while true {
                    guard let descriptor = connected(path) else {
                        refused.add(1)
                        usleep(100_000)
                        continue
                    }
                    let hello = ClientMessage.hello(versions: [1], accessGroups: [], allGroups: false).encoded()
                    var answer = [UInt8](repeating: 0, count: 4_096)
                    guard FrameReader.write(hello, to: descriptor), recv(descriptor, &answer, answer.count, 0) > 0
                    else {
                        close(descriptor)
                        refused.add(1)
                        usleep(100_000)
                        continue
                    }
                    var header: [UInt8] = [1]
                    withUnsafeBytes(of: UInt32(bytes).bigEndian) { header += $0 }
                    var left = bytes - 1
                    var sent = send(descriptor, header, header.count, Int32(MSG_NOSIGNAL)) == header.count
                    while sent && left > 0 {
                        let count = chunk.withUnsafeBytes {
                            send(descriptor, $0.baseAddress, min(left, $0.count), Int32(MSG_NOSIGNAL))
                        }
                        if count < 0 && errno == EINTR { continue }
                        sent = count > 0
                        left -= max(count, 0)
                    }
                    if sent { framed.add(1) }
                    // Held until the daemon closes it (a refusal), then another.
                    var peek: UInt8 = 0
                    while sent && recv(descriptor, &peek, 1, Int32(MSG_PEEK)) > 0 { usleep(100_000) }
                    close(descriptor)
                }
            })
        // Blocked before the threads start, so that they inherit the mask and only sigwait takes the signal.
        var stop = sigset_t()
        sigemptyset(&stop)
        sigaddset(&stop, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &stop, nil)
        threads.forEach { $0.start() }
        var signal: Int32 = 0
        while lookups.load() == 0 || silent.load() == 0 || framed.load() == 0 { usleep(10_000) }
        write("flooding\n")
        sigwait(&stop, &signal)
        write(
            "lookups=\(lookups.load())\nsilent connections=\(silent.load())\n60 MiB frames sent=\(framed.load())\n"
                + "refused=\(refused.load())\n")
        exit(0)
    }

    /// A connection to the socket at `path`, nil when refused.
    private static func connected(_ path: String) -> Int32? {
        try? SocketClient.connectBare(path).descriptor
    }

    /// Straight to standard output, unbuffered: the parent reads the log while this process runs.
    private static func write(_ text: String) {
        _ = text.withCString { Glibc.write(1, $0, strlen($0)) }
    }
}

/// A counter shared by the flood's threads.
final class FloodCounter: @unchecked Sendable {
    private var value: Int
    private let lock = NSLock()

    init(_ value: Int) { self.value = value }

    func add(_ amount: Int) { lock.withLock { value += amount } }
    func load() -> Int { lock.withLock { value } }
}
