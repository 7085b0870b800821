import Authenticators
import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityServer

/// What `LAContext.evaluatePolicy` adds beyond the authenticator itself: `.deviceOwnerAuthentication` answered
/// with the passcode through pam_matrix (no fingerprint enrolled, so it goes straight to PAM), against
/// `PasscodeAuthenticator.authenticate` on the same PAM service in the same run. The difference is the context
/// layer: the client request, the engine's context record, the evaluation task and its executor hops, the
/// presenter adapter, recording the credential and the keychain-unlock hook. Target: at most 1 ms per evaluation.
enum ContextBenchmarks {
    /// A presenter that always answers the bench user's passcode.
    struct BenchPresenter: AuthenticationPresenter {
        func fingerprintPromptDidBegin(
            _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
        ) {}
        func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
            AuthenticationSecret(copying: Array("secret".utf8))
        }
    }

    static func run() async throws {
        print("== LAContext.evaluatePolicy vs the passcode authenticator alone (added time; target <= 1000 us)")
        let directory = try AuthenticatorBenchmarks.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard let confdir = try Measure.writeBenchPAM(in: directory) else {
            print("evaluatePolicy (passcode): not measured: pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        let pam = PasscodeAuthenticator.Configuration(service: "la-bench", configurationDirectory: confdir)

        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: directory + "/store"), accessGroups: ["bench"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory + "/la-state", username: "bench", passcode: pam,
                readerDrivers: ["virtual_device"]))
        let context = KeychainClientSelection.$current.withValue(client) { LAContext() }
        context.presenter = BenchPresenter()
        let authenticator = PasscodeAuthenticator(
            configuration: pam, policy: try AttemptPolicy(directory: directory + "/pam-state"))
        let presenter = AuthenticatorBenchmarks.FixedPasscode()

        let evaluate: @Sendable () async throws -> Void = {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "bench")
        }
        let authenticate: @Sendable () async throws -> Void = {
            try await authenticator.authenticate(user: "bench", presenter: presenter)
        }
        for _ in 0..<50 {
            try await evaluate()
            try await authenticate()
        }
        // Alternating rounds, best of each: both sides see the same machine load.
        var ours = 0.0
        var baseline = 0.0
        for _ in 0..<5 {
            ours = max(ours, try await rate(evaluate))
            baseline = max(baseline, try await rate(authenticate))
        }
        AuthenticatorBenchmarks.report(
            "evaluatePolicy(.deviceOwnerAuthentication) by passcode (pam_matrix)", ours: ours, baseline: baseline,
            baselineName: "PasscodeAuthenticator.authenticate")
        context.invalidate()
        try await PromptAgentBenchmarks.run()
    }

    /// Calls per second of `body` over 0.5 s of wall-clock time.
    static func rate(_ body: @Sendable () async throws -> Void) async throws -> Double {
        var iterations = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(500) {
            try await body()
            iterations += 1
        }
        return Double(iterations) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
    }
}

/// What `lactl agent` adds to a passcode evaluation through localauthd: `LAContext.evaluatePolicy(.deviceOwner…)`
/// answered first by the program's own presenter, then, with an agent registered, by the agent and a scripted
/// pinentry (a shell script that answers GETPIN with the passcode at once: the person's typing left out). The
/// baseline beside it is that pinentry's start alone (one run of the script), which the agent pays per question.
enum PromptAgentBenchmarks {
    static func run() async throws {
        print("== LAContext.evaluatePolicy by passcode through localauthd: the program's presenter vs lactl agent")
        let release = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // Canonical, as the registry compares it (`.build/release` is a symbolic link).
        let lactl = release.appendingPathComponent("lactl").resolvingSymlinksInPath().path
        guard FileManager.default.isExecutableFile(atPath: lactl) else {
            print("prompt agent: skipped, \(lactl) missing (make bench builds it)")
            return
        }
        let directory = URL(fileURLWithPath: try AuthenticatorBenchmarks.makeTemporaryDirectory())
        defer { try? FileManager.default.removeItem(at: directory) }
        guard FileManager.default.fileExists(atPath: Measure.pamMatrix) else {
            print("prompt agent: not measured: pam_matrix missing (apt-get install libpam-wrapper)")
            return
        }
        // PAM for the daemon's user of this process (pam_matrix), the registry naming lactl as the administrative
        // tool (as make install does), and the scripted pinentry.
        let user = String(cString: getpwuid(getuid()).pointee.pw_name)
        let pam = directory.path + "/pam"
        try FileManager.default.createDirectory(atPath: pam, withIntermediateDirectories: true)
        try "\(user):secret:la-bench\n".write(toFile: pam + "/passdb", atomically: true, encoding: .utf8)
        try
            "auth required \(Measure.pamMatrix) passdb=\(pam)/passdb\naccount required \(Measure.pamMatrix) passdb=\(pam)/passdb\n"
            .write(toFile: pam + "/la-bench", atomically: true, encoding: .utf8)
        let registry = directory.path + "/config/apps.d"
        try FileManager.default.createDirectory(atPath: registry, withIntermediateDirectories: true)
        try "application-identifier = localauthentication.lactl\nexecutable = \(lactl)\nadministrative = yes\n"
            .write(toFile: registry + "/lactl.conf", atomically: true, encoding: .utf8)
        let pinentry = directory.path + "/pinentry-scripted"
        try """
        #!/bin/sh
        echo "OK scripted pinentry"
        while read -r line; do
          case "$line" in
            GETPIN*) echo "D secret"; echo OK;;
            BYE*) echo OK; exit 0;;
            *) echo OK;;
          esac
        done

        """.write(toFile: pinentry, atomically: true, encoding: .utf8)
        chmod(pinentry, 0o755)
        setenv("LA_PAM_SERVICE", "la-bench", 1)
        setenv("LA_PAM_CONFDIR", pam, 1)
        setenv("LA_READER_DRIVERS", "no_such_driver", 1)
        defer {
            unsetenv("LA_PAM_SERVICE")
            unsetenv("LA_PAM_CONFDIR")
            unsetenv("LA_READER_DRIVERS")
        }
        guard let started = BenchDaemon.start(in: directory) else { return }
        defer { started.stop() }
        let socket = directory.path + "/localauthd.sock"
        let client = try SocketClient(path: socket, accessGroups: [], defaultPresenter: nil)
        let context = KeychainClientSelection.$current.withValue(client) { LAContext() }
        context.presenter = ContextBenchmarks.BenchPresenter()
        let evaluate = {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "bench")
        }
        for _ in 0..<20 { try await evaluate() }
        let byPresenter = try await times(200, evaluate)

        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, directory.path + "/agent.log", O_WRONLY | O_CREAT, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        defer { posix_spawn_file_actions_destroy(&actions) }
        setenv("LA_DAEMON_SOCKET", socket, 1)
        let spawned = Measure.spawn(&pid, lactl, ["agent", "--pinentry", pinentry], actions: &actions)
        unsetenv("LA_DAEMON_SOCKET")
        guard spawned == 0 else {
            print("prompt agent: skipped, lactl agent did not start")
            return
        }
        defer { Measure.stop(pid) }
        var log = ""
        for _ in 0..<200 where !log.contains("drawing the prompts") {
            usleep(50_000)
            log = (try? String(contentsOfFile: directory.path + "/agent.log", encoding: .utf8)) ?? ""
        }
        guard log.contains("drawing the prompts") else {
            print("prompt agent: skipped, lactl agent did not register: \(log)")
            return
        }
        // The presenter stays set: the daemon prefers the agent, so the presenter is no longer asked.
        for _ in 0..<20 { try await evaluate() }
        let byAgent = try await times(200, evaluate)
        let pinentryAlone = try await times(200) {
            guard Measure.run(pinentry, []) != nil else { throw CocoaError(.executableLoad) }
        }
        func ms(_ seconds: Double) -> String { String(format: "%.2f ms", seconds * 1e3) }
        print(
            "evaluatePolicy by passcode through localauthd: the program's presenter median \(ms(byPresenter.median)), "
                + "lactl agent with a scripted pinentry median \(ms(byAgent.median)); the agent adds "
                + "\(ms(byAgent.median - byPresenter.median)), of which starting pinentry \(ms(pinentryAlone.median))")
        context.invalidate()
    }

    /// `count` timed calls of `body`, sorted.
    static func times(_ count: Int, _ body: () async throws -> Void) async throws -> DaemonBenchmarks.Latencies {
        var times: [Double] = []
        for _ in 0..<count {
            let start = ContinuousClock.now
            try await body()
            times.append(AuthenticatorBenchmarks.seconds(ContinuousClock.now - start))
        }
        return DaemonBenchmarks.Latencies(sorted: times.sorted())
    }
}
