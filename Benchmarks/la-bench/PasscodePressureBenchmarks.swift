import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// One user's passcode check while another user's passcode question waits unanswered (issue 47, attack 5): the
/// victim's `.passcode` evaluation through localauthd (pam_matrix), quiet and then while uid 65534 (a copy of la-bench
/// started with `setpriv`, `la-bench idle-prompt SOCKET`) holds its own evaluation at its passcode question and never
/// answers, from the same process against the same daemon in one run. Before each PAM transaction had a thread of
/// its own the victim waited for as long as the other user liked; the target is a few milliseconds at most.
enum PasscodePressureBenchmarks {
    static let idlingUser: uid_t = 65_534

    /// Answers every passcode question with `secret`.
    struct Answering: EvaluationPresenter {
        func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
        {
        }
        func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
        func fingerprintPromptDidEnd() {}
        func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
            SecureBytes(Array("secret".utf8))
        }
        func show(_ message: PasscodeMessage) {}
    }

    /// Says `asked` once its question came, then never answers.
    struct NeverAnswering: EvaluationPresenter {
        func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
        {
        }
        func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
        func fingerprintPromptDidEnd() {}
        func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
            print("asked")
            fflush(nil)
            while true { sleep(3_600) }
        }
        func show(_ message: PasscodeMessage) {}
    }

    static func run() async throws {
        print("== a passcode check through localauthd while another user's passcode question waits (same run)")
        guard getuid() == 0 else {
            print("passcode pressure: skipped, needs root to start the other user's evaluation")
            return
        }
        guard FileManager.default.fileExists(atPath: Measure.pamMatrix) else {
            print("passcode pressure: skipped, pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        let directory = URL(fileURLWithPath: try AuthenticatorBenchmarks.makeTemporaryDirectory())
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(directory.path, 0o755)
        let confdir = directory.path + "/pam"
        try FileManager.default.createDirectory(atPath: confdir, withIntermediateDirectories: true)
        let idler = String(cString: getpwuid(idlingUser).pointee.pw_name)
        try "root:secret:la-bench\n\(idler):other:la-bench\n".write(
            toFile: confdir + "/passdb", atomically: true, encoding: .utf8)
        let module = "\(Measure.pamMatrix) passdb=\(confdir)/passdb"
        try "auth required \(module)\naccount required \(module)\n".write(
            toFile: confdir + "/la-bench", atomically: true, encoding: .utf8)
        setenv("LA_PAM_SERVICE", "la-bench", 1)
        setenv("LA_PAM_CONFDIR", confdir, 1)
        let daemon = BenchDaemon.start(in: directory)
        unsetenv("LA_PAM_SERVICE")
        unsetenv("LA_PAM_CONFDIR")
        guard let daemon else { return }
        defer { daemon.stop() }
        let victim = daemon.client
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "la-bench"))
        func check() async throws -> Double {
            let start = ContinuousClock.now
            guard case .context(let id) = try await victim.send(.createContext, presenter: nil) else {
                throw KeychainStatus(.internalComponent, "la-bench: no context")
            }
            _ = try await victim.send(.evaluatePolicy(.passcode, id, options), presenter: Answering())
            _ = try await victim.send(.invalidate(id), presenter: nil)
            let elapsed = ContinuousClock.now - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        func median(_ count: Int) async throws -> Double {
            var times: [Double] = []
            for _ in 0..<count { times.append(try await check()) }
            return times.sorted()[count / 2]
        }
        _ = try await median(10)
        let quiet = try await median(30)

        let log = directory.appendingPathComponent("idler.log").path
        let socket = directory.path + "/localauthd.sock"
        guard let pid = try Measure.spawnCopy(asUser: idlingUser, in: directory, ["idle-prompt", socket], log: log)
        else {
            print("passcode pressure: skipped, setpriv did not start the other user's evaluation")
            return
        }
        defer { Measure.stop(pid) }
        let report = Measure.report(in: log, containing: "asked")
        guard report.found else {
            print("passcode pressure: skipped, the other user's question never came: \(report.text)")
            return
        }
        let held = try await median(30)
        func ms(_ seconds: Double) -> String { String(format: "%.2f ms", seconds * 1e3) }
        print(
            "passcode check while another user's question waits: quiet median \(ms(quiet)), with the question "
                + "waiting \(ms(held)), difference \(ms(held - quiet)) (target: a few ms)")
    }

    /// The other user's evaluation (`la-bench idle-prompt SOCKET`): asks for the passcode and never answers.
    static func idle(socket path: String) async -> Never {
        do {
            let client = try SocketClient(path: path, accessGroups: [])
            guard case .context(let id) = try await client.send(.createContext, presenter: nil) else { exit(1) }
            _ = try await client.send(
                .evaluatePolicy(.passcode, id, EvaluationOptions(prompt: EvaluationPrompt(reason: "idle"))),
                presenter: NeverAnswering())
        } catch {
            print("error \(error)")
        }
        exit(1)
    }
}
