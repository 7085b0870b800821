import Authenticators
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import StoreFiles
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// One test's daemon: a real `localauthd` on a socket of its own, its store in a scratch directory, PAM through
/// pam_matrix (this user, passcode `secret`) and the virtual reader on a socket of its own.
struct DaemonWorld {
    static let service = "la-daemon-test"

    let directory: String
    let reader: VirtualReaderSocket
    let environment: [String: String]
    var daemon: DaemonProcess

    init() throws {
        var template = Array("/tmp/la-daemon-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
        reader = VirtualReaderSocket(path: directory + "/reader.sock")
        let user = DataLocations.currentUserName() ?? "root"
        try MatrixPAM.writeService(Self.service, in: directory, users: [(user, "secret")])
        environment = [
            "LA_PAM_SERVICE": Self.service, "LA_PAM_CONFDIR": directory, "LA_READER_DRIVERS": "virtual_device",
            "FP_DRIVERS_WHITELIST": "virtual_device", "FP_VIRTUAL_DEVICE": reader.path,
        ]
        daemon = try DaemonProcess(directory: directory, environment: environment)
    }

    /// Starts a new daemon on the same socket and store (after the last one stopped).
    mutating func restart() throws {
        daemon = try DaemonProcess(directory: directory, environment: environment)
    }

    func close() {
        if daemon.isRunning { daemon.stop() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

func genericPassword(_ account: String, data: String? = nil) -> [String: KeychainValue] {
    var item: [String: KeychainValue] = ["class": .string("genp"), "svce": .string("daemon"), "acct": .string(account)]
    if let data { item["v_Data"] = .secret(SecureBytes(Array(data.utf8))) }
    return item
}

/// What `client` finds for `account`, as text; nil when nothing.
func foundPassword(_ client: any SecurityClient, _ account: String) async throws -> String? {
    var query = genericPassword(account)
    query["r_Data"] = .bool(true)
    do {
        guard case .items(let results) = try await client.send(.copyMatching(query)),
            let data = results.items.first?.data
        else { return nil }
        return String(decoding: data.unprotectedData(), as: UTF8.self)
    } catch let status as KeychainStatus where status.code == .itemNotFound {
        return nil
    }
}

/// The `LAError` code an authentication request throws; nil when it succeeds.
func authenticationCode(_ body: () async throws -> Void) async -> AuthenticationError.Code? {
    do {
        try await body()
        return nil
    } catch let error as AuthenticationError {
        return error.code
    } catch {
        Issue.record("not an AuthenticationError: \(error)")
        return nil
    }
}

/// Issue "localauthd": the engine in its own process, every request over its Unix socket.
@Suite("localauthd over its socket", .serialized, .virtualReaderLock, .timeLimit(.minutes(2)))
struct DaemonTests {
    @Test func keychainRequestsGoThroughTheDaemonAndSurviveAGracefulRestart() async throws {
        var world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try await client.send(.add(genericPassword("alice", data: "hunter2")))
        #expect(try await foundPassword(client, "alice") == "hunter2")
        // The store is the daemon's: a file under its state directory, one directory per uid.
        #expect(FileManager.default.fileExists(atPath: world.daemon.stateDirectory + "/\(getuid())"))
        let stopped = world.daemon.stop(SIGTERM)
        #expect(stopped.status == 0 && !stopped.bySignal)
        // A request after the daemon went away fails as unreachable, never silently elsewhere.
        await #expect(throws: KeychainStatus.self) { try await client.send(.copyMatching(genericPassword("alice"))) }
        try world.restart()
        #expect(try await foundPassword(try world.daemon.client(), "alice") == "hunter2")
    }

    @Test func aContextHandleOfOneConnectionIsRefusedOnAnother() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let owner = try world.daemon.client()
        let intruder = try world.daemon.client()
        guard case .context(let id) = try await owner.send(.createContext) else {
            Issue.record("no context")
            return
        }
        #expect(await authenticationCode { _ = try await intruder.send(.evaluatedDomainState(id)) } == .invalidContext)
        #expect(await authenticationCode { _ = try await owner.send(.evaluatedDomainState(id)) } == nil)
        // Named in a keychain query, the stolen handle is refused too.
        var query = genericPassword("x")
        query["u_AuthCtx"] = .data(Data(id.bytes))
        do {
            _ = try await intruder.send(.copyMatching(query))
            Issue.record("the stolen handle was accepted")
        } catch let status as KeychainStatus {
            #expect(status.code == .authFailed)
        }
    }

    @Test func aPasscodePromptTravelsToTheClientsPresenterAndBack() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        let context = try await client.passcodeContext(reason: "Unlock", presenter: FixedPasscodePresenter(passcode: "secret"))
        guard case .domainState = try await client.send(.evaluatedDomainState(context)) else {
            Issue.record("the context is not usable")
            return
        }
        let wrong = await authenticationCode {
            _ = try await client.passcodeContext(reason: "Unlock", presenter: FixedPasscodePresenter(passcode: "nope"))
        }
        #expect(wrong == .authenticationFailed)
    }

    @Test func aClientThatGoesAwayMidPromptFreesTheReaderForTheNextEvaluation() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try await enrollThroughRequests(client, socket: world.reader, printID: "alice-1", finger: .rightIndex)
        // A client waiting at a fingerprint prompt whose connection drops.
        let began = DispatchSemaphore(value: 0)
        let leaving = try world.daemon.client(presenter: SignallingPresenter(began: began))
        guard case .context(let id) = try await leaving.send(.createContext) else { return }
        let options = EvaluationOptions(prompt: EvaluationPrompt(reason: "r"))
        let abandoned = Task {
            try? await leaving.send(.evaluatePolicy(.biometrics, id, options), presenter: leaving.defaultPresenter)
        }
        #expect(began.wait(timeout: .now() + 10) == .success)
        leaving.disconnect()
        _ = await abandoned.value
        // The next evaluation, on another connection, gets the reader and a finger at once.
        guard case .context(let next) = try await client.send(.createContext) else { return }
        let started = ContinuousClock.now
        async let matched = client.send(
            .evaluatePolicy(.biometrics, next, options), presenter: SignallingPresenter(began: DispatchSemaphore(value: 0)))
        try await world.reader.send("SCAN alice-1")
        guard case .credential(let credential) = try await matched else {
            Issue.record("no credential")
            return
        }
        #expect(credential.method == .biometry)
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aKilledClientProcessMidScanFreesTheReader() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try await enrollThroughRequests(client, socket: world.reader, printID: "alice-1", finger: .rightIndex)
        // `lactl biometry verify` through the daemon waits for a finger; it is killed while it waits.
        let verify = try SpawnedProcess(
            try lactlExecutable().path, ["biometry", "verify"], environment: ["LA_DAEMON_SOCKET": world.daemon.socket])
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline,
            !(try String(contentsOfFile: world.daemon.log, encoding: .utf8)).contains("pid=\(verify.pid)")
        {
            usleep(50_000)
        }
        usleep(300_000)
        #expect(verify.stop(SIGKILL).bySignal)
        async let matched = client.send(.verifyFinger)
        try await world.reader.send("SCAN alice-1")
        guard case .matched(let print) = try await matched else {
            Issue.record("no match")
            return
        }
        #expect(print.finger == .rightIndex)
    }

    @Test func keychainEventsStreamToEverySubscribedConnectionOfTheUser() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let watcher = try world.daemon.client()
        let writer = try world.daemon.client()
        var events = watcher.keychainEvents().makeAsyncIterator()
        // The subscription travels on another connection than the adds: add until its first event proves it is in
        // place, then a deletion must arrive too.
        let probing = Task {
            for index in 0..<400 where !Task.isCancelled {
                _ = try? await writer.send(.add(genericPassword("probe-\(index)", data: "p")))
                try? await Task.sleep(for: .milliseconds(25))
            }
        }
        #expect(await events.next()?.kind == .added)
        probing.cancel()
        _ = await probing.value
        _ = try await writer.send(.add(genericPassword("watched", data: "1")))
        _ = try await writer.send(.delete(genericPassword("watched")))
        var sawDeletion = false
        while let event = await events.next() {
            if event.kind == .deleted {
                sawDeletion = true
                break
            }
        }
        #expect(sawDeletion)
    }

    @Test func garbageAndOversizedFramesAreRefusedAndOthersAreStillServed() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        for bytes in [
            Array("GET / HTTP/1.1\r\n\r\n".utf8),  // another version byte
            [1, 0xFF, 0xFF, 0xFF, 0xFF],  // 4 GiB declared
            [1, 0, 0, 0, 3, 0xEE, 0xEE, 0xEE],  // a whole frame that does not decode
            [1, 0, 0, 0, 9, 1, 0, 0],  // the connection ends inside a frame
        ] as [[UInt8]] {
            let answer = try rawExchange(world.daemon.socket, bytes)
            #expect(answer.closed)
            if let message = answer.message {
                guard case .refused = message else {
                    Issue.record("answered \(message)")
                    continue
                }
            }
        }
        // A request before the hello is refused the same way.
        let early = try rawExchange(
            world.daemon.socket, Array(ClientMessage.subscribeKeychainEvents(1).encoded().unprotectedData()))
        #expect(early.closed)
        _ = try await client.send(.add(genericPassword("still", data: "served")))
        #expect(try await foundPassword(client, "still") == "served")
        #expect(world.daemon.isRunning)
    }
}

/// Signals `began` when a fingerprint prompt begins; answers nothing.
struct SignallingPresenter: EvaluationPresenter {
    let began: DispatchSemaphore

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        began.signal()
    }
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? { nil }
    func show(_ message: PasscodeMessage) {}
}

/// Connects to `path`, writes `bytes`, half-closes, and reads what comes back until the daemon closes (at most
/// 10 s): the first frame decoded, and whether the connection ended.
func rawExchange(_ path: String, _ bytes: [UInt8]) throws -> (message: ServerMessage?, closed: Bool) {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard connected == 0 else { throw CocoaError(.fileReadNoPermission) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    shutdown(fd, Int32(SHUT_WR))
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n > 0 {
            received += buffer[0..<n]
            continue
        }
        let message = try? ServerMessage(decoding: Data(received))
        return (message, n == 0)
    }
}
