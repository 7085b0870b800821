import Authenticators
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import StoreFiles
import Synchronization
import TestSupport
import Testing

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

    /// - Parameter extraEnvironment: more of the daemon's environment (`LA_IDLE_LOCK`, …).
    init(extraEnvironment: [String: String] = [:]) throws {
        var template = Array("/tmp/la-daemon-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        directory = String(cString: made)
        reader = VirtualReaderSocket(path: directory + "/reader.sock")
        let user = DataLocations.currentUserName() ?? "root"
        try MatrixPAM.writeService(Self.service, in: directory, users: [(user, "secret")])
        environment = [
            "LA_PAM_SERVICE": Self.service, "LA_PAM_CONFDIR": directory, "LA_READER_DRIVERS": "virtual_device",
            "FP_DRIVERS_WHITELIST": "virtual_device", "FP_VIRTUAL_DEVICE": reader.path,
        ].merging(extraEnvironment) { $1 }
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
@Suite("localauthd over its socket", .serialized, .daemonReaderTurn(timeLimit: .seconds(120)))
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
        let context = try await client.passcodeContext(
            reason: "Unlock", presenter: FixedPasscodePresenter(passcode: "secret"))
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
        #expect(await signalled(began, within: 60), "the prompt began")
        leaving.disconnect()
        _ = await abandoned.value
        // The next evaluation, on another connection, gets the reader and a finger at once.
        guard case .context(let next) = try await client.send(.createContext) else { return }
        let started = ContinuousClock.now
        async let matched = client.send(
            .evaluatePolicy(.biometrics, next, options),
            presenter: SignallingPresenter(began: DispatchSemaphore(value: 0)))
        try await world.reader.send("SCAN alice-1")
        guard case .credential(let credential) = try await matched else {
            Issue.record("no credential")
            return
        }
        #expect(credential.method == .biometry)
        #expect(ContinuousClock.now - started < .seconds(30))
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
        // The finger goes to the reader once the next verification waits for it: sent earlier, it could reach the
        // killed client's scan while that is still being cancelled.
        let (waiting, signal) = AsyncStream.makeStream(of: Void.self)
        async let matched = client.send(.verifyFinger) { event in
            if case .verification(.waitingForFinger) = event { signal.yield() }
        }
        let reached: Void? = await firstElement(of: waiting, within: .seconds(20))
        #expect(reached != nil, "the next verification reached the reader")
        try await world.reader.send("SCAN alice-1")
        guard case .matched(let print) = try await matched else {
            Issue.record("no match")
            return
        }
        #expect(print.finger == .rightIndex)
    }

    /// A client dropped after its connection ended must not touch the descriptor number it had: the process may
    /// have opened another socket on it since (it shut down a live connection of another test before).
    @Test func aClientWhoseConnectionEndedNeverTouchesItsOldDescriptorNumber() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        let number = try #require(client.descriptor)
        world.daemon.stop(SIGTERM)
        for _ in 0..<500 where client.descriptor != nil { usleep(10_000) }
        #expect(client.descriptor == nil, "the client saw the daemon go")
        // New sockets of this process, until one lands on the freed number (the lowest free one is taken first).
        var pairs: [[Int32]] = []
        defer { for pair in pairs { close(pair[0]); close(pair[1]) } }
        var landed: [Int32]?
        for _ in 0..<64 where landed == nil {
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { break }
            pairs.append(pair)
            if pair.contains(number) { landed = pair }
        }
        let pair = try #require(landed, "no new socket took descriptor \(number)")
        let (mine, peer) = pair[0] == number ? (pair[0], pair[1]) : (pair[1], pair[0])
        client.disconnect()
        await #expect(throws: (any Error).self) { _ = try await client.send(.lockState) }
        // The socket on that number is whole: nothing was written into it, and a byte still crosses both ways.
        var unexpected = [UInt8](repeating: 0, count: 64)
        #expect(recv(mine, &unexpected, 64, Int32(MSG_DONTWAIT)) == -1 && errno == EAGAIN)
        var byte: UInt8 = 7
        #expect(send(peer, &byte, 1, Int32(MSG_NOSIGNAL)) == 1)
        var received: UInt8 = 0
        #expect(recv(mine, &received, 1, 0) == 1 && received == 7)
        #expect(send(mine, &byte, 1, Int32(MSG_NOSIGNAL)) == 1)
    }

    /// Two users of one daemon: the kernel's peer credentials pick the store (`state/<uid>`). A program of
    /// another user (nobody, through setpriv, with `lactl`) reaches the same socket, finds nothing of this user's,
    /// and what it adds stays in its own store.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func anotherUsersProgramGetsAStoreOfItsOwnAndNothingOfThisUsers() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try await client.send(.add(genericPassword("root-only", data: "root-secret")))
        // The world's directory is private; open it (the socket itself is 0666) and give nobody a lactl to run.
        chmod(world.directory, 0o755)
        let lactl = world.directory + "/lactl"
        try copyExecutable(try lactlExecutable().path, to: lactl)
        chmod(lactl, 0o755)
        func asNobody(_ arguments: [String]) throws -> (status: Int32, output: String) {
            let log = world.directory + "/nobody-\(UUID().uuidString).log"
            let process = try SpawnedProcess(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", lactl] + arguments,
                environment: ["LA_DAEMON_SOCKET": world.daemon.socket, "LA_PRESENTER": "none", "HOME": "/nonexistent"],
                log: log)
            let exit = process.wait(timeout: 30) ?? process.stop(SIGKILL)
            return (exit.status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
        let stolen = try asNobody(["keychain", "find-generic-password", "-s", "daemon", "-a", "root-only", "-w"])
        #expect(stolen.status != 0)
        #expect(!stolen.output.contains("root-secret"))
        let added = try asNobody([
            "keychain", "add-generic-password", "-s", "daemon", "-a", "nobody-item", "-w", "n-pw",
        ])
        #expect(added.status == 0, "\(added.output)")
        let found = try asNobody(["keychain", "find-generic-password", "-s", "daemon", "-a", "nobody-item", "-w"])
        #expect(found.status == 0 && found.output.contains("n-pw"), "\(found.output)")
        // Each user's store is the daemon's own directory for that uid, unreadable to the other.
        var info = stat()
        #expect(
            stat(world.daemon.stateDirectory + "/65534", &info) == 0 && info.st_uid == 0 && info.st_mode & 0o077 == 0)
        #expect(try await foundPassword(client, "nobody-item") == nil)
        #expect(try await foundPassword(client, "root-only") == "root-secret")
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
    let fd = try sendHalfClosing(path, bytes)
    defer { close(fd) }
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

/// Connects to `path`, writes `bytes` and half-closes: the connection, to read the answer from (receives time out
/// after 10 s).
func sendHalfClosing(_ path: String, _ bytes: [UInt8]) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard withUnixAddress(path, { connect(fd, $0, $1) }) == 0 else {
        close(fd)
        throw CocoaError(.fileReadNoPermission)
    }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    shutdown(fd, Int32(SHUT_WR))
    return fd
}

/// What `body` makes of the socket address of Unix socket `path` and its length.
func withUnixAddress<Result>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}
