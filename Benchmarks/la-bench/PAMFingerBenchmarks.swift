import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 49: the time `pam_localauth.so finger` adds to an authentication where no finger is offered (the lid
/// closed, an SSH session, localauthd not running), against the same stack without the module, in the same run. Each
/// stack runs in `pam-session-driver` (`make pam`) on a pseudo-terminal of its own (`script`), as sudo would, with
/// `pam_permit` after the module so that nothing else is timed: 200 `pam_authenticate` calls a round, the median of
/// five rounds, the two stacks alternating. Target: at most 5 ms added per authentication.
enum PAMFingerBenchmarks {
    static let driver = ".build/pam/pam-session-driver"
    static let module = ".build/pam/pam_localauth.so"
    static let calls = 200

    static func run() async throws {
        print("== pam-finger: what pam_localauth.so finger adds where no finger is offered, per authentication")
        guard getuid() == 0 else {
            print("pam-finger: skipped, needs root (the module acts as the user being authenticated)")
            return
        }
        guard FileManager.default.isExecutableFile(atPath: driver), FileManager.default.fileExists(atPath: module),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/script")
        else {
            print("pam-finger: skipped, \(driver) or \(module) missing (make pam builds them)")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-pam-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let modulePath = FileManager.default.currentDirectoryPath + "/" + module
        let cases: [(name: String, lid: String, ssh: Bool)] = [
            ("the lid closed", "closed", false), ("an SSH session", "open", true),
            ("localauthd not running", "open", false),
        ]
        try "auth required pam_permit.so\naccount required pam_permit.so\n".write(
            toFile: directory + "/plain", atomically: true, encoding: .utf8)
        for (index, entry) in cases.enumerated() {
            try "state:      \(entry.lid)\n".write(toFile: directory + "/lid", atomically: true, encoding: .utf8)
            let service = "finger\(index)"
            try """
            auth sufficient \(modulePath) finger socket=\(directory)/absent.sock lid=\(directory)/lid
            auth required pam_permit.so
            account required pam_permit.so

            """.write(toFile: directory + "/" + service, atomically: true, encoding: .utf8)
            var with: [Double] = []
            var without: [Double] = []
            for _ in 0..<5 {
                guard let ours = seconds(service: service, in: directory, ssh: entry.ssh),
                    let plain = seconds(service: "plain", in: directory, ssh: entry.ssh)
                else {
                    print("pam-finger, \(entry.name): skipped, the driver did not answer")
                    break
                }
                with.append(ours)
                without.append(plain)
            }
            guard with.count == 5 else { continue }
            let added = (median(with) - median(without)) / Double(calls) * 1_000
            print(
                String(
                    format: "pam-finger, %@: %.3f ms per authentication with the module, %.3f ms without, %.3f ms "
                        + "added (target <= 5 ms: %@)",
                    entry.name, median(with) / Double(calls) * 1_000, median(without) / Double(calls) * 1_000, added,
                    added <= 5 ? "met" : "NOT MET"))
        }
    }

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// The driver's answers counted so far, shared with the reading handler.
    final class Answers: Sendable {
        private let value = Mutex(0)
        var count: Int { value.withLock { $0 } }
        func add(_ more: Int) -> Int {
            value.withLock {
                $0 += more; return $0
            }
        }
        func reset() { value.withLock { $0 = 0 } }
    }

    /// Seconds for `calls` authentications on `service`'s stack, in one driver on a pseudo-terminal; nil when it
    /// did not answer them all within a minute.
    static func seconds(service: String, in directory: String, ssh: Bool) -> Double? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        // No echo: the terminal's echo of a command would land in the middle of the driver's answers.
        let command =
            "stty -echo; exec \(FileManager.default.currentDirectoryPath)/\(driver) --confdir \(directory) \(service) root"
        process.arguments = ["-qfec", command, "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        for name in ["SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY"] { environment[name] = nil }
        if ssh { environment["SSH_CONNECTION"] = "203.0.113.7 50022 127.0.0.1 22" }
        process.environment = environment
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let answered = Answers()
        let done = DispatchSemaphore(value: 0)
        let pending = Mutex("")
        output.fileHandleForReading.readabilityHandler = { handle in
            // The terminal ends lines with CR LF, one Character in Swift: the CRs go first.
            let text = String(decoding: handle.availableData.filter { $0 != 13 }, as: UTF8.self)
            let lines = pending.withLock { buffer -> [Substring] in
                buffer += text
                let parts = buffer.split(separator: "\n", omittingEmptySubsequences: false)
                buffer = String(parts.last ?? "")
                return Array(parts.dropLast())
            }
            let count = lines.filter { $0.hasPrefix("authenticate ") && $0.dropFirst(13).first?.isNumber == true }.count
            if count > 0, answered.add(count) >= calls { done.signal() }
        }
        guard (try? process.run()) != nil else { return nil }
        defer {
            output.fileHandleForReading.readabilityHandler = nil
            process.terminate()
            process.waitUntilExit()
        }
        // The driver is ready once it answers a first call; then the round is timed.
        input.fileHandleForWriting.write(Data("authenticate\n".utf8))
        let deadline = Date().addingTimeInterval(60)
        while answered.count < 1 && Date() < deadline { usleep(1_000) }
        answered.reset()
        let start = ContinuousClock.now
        // A few commands in flight at a time: a terminal's line buffer drops what overflows its 4 KiB.
        let window = 16
        let call = Data("authenticate\n".utf8)
        for sent in 0..<calls {
            while sent - answered.count >= window {
                guard Date() < deadline.addingTimeInterval(60) else { return nil }
                usleep(50)
            }
            input.fileHandleForWriting.write(call)
        }
        guard done.wait(timeout: .now() + 60) == .success else { return nil }
        let elapsed = ContinuousClock.now - start
        input.fileHandleForWriting.write(Data("end\n".utf8))
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
