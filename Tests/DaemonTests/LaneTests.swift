import CSocket
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityTransport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// localauthd's lane (`<socket>.lane`): brief keychain requests that cannot prompt are answered on a thread of the
/// connection's own; everything else stays on the main socket, and the lane refuses it.
@Suite("localauthd's lane", .serialized, .timeLimit(.minutes(2)))
struct LaneTests {
    /// The daemon's threads serving lane connections (named `lane.connection`).
    static func laneThreads(_ daemon: DaemonProcess) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/task")) ?? []
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            return name.trimmingCharacters(in: .whitespacesAndNewlines) == "lane.connection"
        }.count
    }

    /// Waits up to 5 s for `condition`.
    static func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<250 {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    @Test func briefRequestsWithoutAPresenterTakeTheLaneAndTheRestTheMainSocket() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        #expect(Self.laneThreads(world.daemon) == 0)
        _ = try client.sendBlocking(.add(genericPassword("lane", data: "fast")))
        #expect(Self.laneThreads(world.daemon) == 1, "the add took the lane")
        var query = genericPassword("lane")
        query["r_Data"] = .bool(true)
        guard case .items(let found) = try client.sendBlocking(.copyMatching(query)) else {
            Issue.record("no items")
            return
        }
        #expect(found.items.first?.data.map { String(decoding: $0.unprotectedData(), as: UTF8.self) } == "fast")
        // An update is not brief: the main socket serves it, and the lane sees the new value at once.
        _ = try client.sendBlocking(
            .update(query: genericPassword("lane"), attributes: ["v_Data": .data(Data("new".utf8))]))
        guard case .items(let updated) = try client.sendBlocking(.copyMatching(query)) else {
            Issue.record("no items")
            return
        }
        #expect(updated.items.first?.data.map { String(decoding: $0.unprotectedData(), as: UTF8.self) } == "new")
        #expect(Self.laneThreads(world.daemon) == 1, "one lane connection for the client")
        // Gone with the client's connections.
        client.disconnect()
        #expect(Self.eventually { Self.laneThreads(world.daemon) == 0 })
        #expect(try await foundPassword(try world.daemon.client(), "lane") == "new")
    }

    /// A client whose daemon restarted while its lane connection was idle is served at once: the request that finds
    /// the old lane gone takes the main socket, and the next makes a new lane.
    @Test func anIdleLaneOfARestartedDaemonIsReplaced() throws {
        var world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try client.sendBlocking(.add(genericPassword("before", data: "1")))
        #expect(Self.laneThreads(world.daemon) == 1)
        let stopped = world.daemon.stop(SIGTERM)
        #expect(stopped.status == 0 && !stopped.bySignal)
        try world.restart()
        _ = try client.sendBlocking(.add(genericPassword("after", data: "2")))
        _ = try client.sendBlocking(.lockState)
        #expect(Self.eventually { Self.laneThreads(world.daemon) == 1 }, "a new lane to the new daemon")
        var query = genericPassword("before")
        query["r_Data"] = .bool(true)
        guard case .items(let found) = try client.sendBlocking(.copyMatching(query)) else {
            Issue.record("no items")
            return
        }
        #expect(found.items.count == 1)
    }

    /// A subscription sees every request the client sends after making it, though the subscription travels on the
    /// main socket and a brief request on the lane, where the daemon could serve it before it has read the
    /// subscription: until the subscription is certainly registered, requests take the main socket behind it.
    @Test func aSubscriptionSeesEveryRequestSentAfterIt() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        _ = try client.sendBlocking(.add(genericPassword("warm", data: "x")))
        #expect(Self.laneThreads(world.daemon) == 1, "the lane is open and idle")
        var missed = 0
        for round in 0..<100 {
            let events = client.keychainEvents()
            _ = try client.sendBlocking(.add(genericPassword("round-\(round)", data: "x")))
            if await firstElement(of: events, within: .seconds(30))?.kind != .added { missed += 1 }
        }
        #expect(missed == 0, "subscriptions that missed the add sent right after them")
    }

    /// A key is made over the main socket; signing with it, naming no context and with nobody to prompt, takes the
    /// lane, and the signature verifies under the key's public key.
    @Test func aSignatureWithAnExistingKeyTakesTheLane() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        guard
            case .generated(let handle, let publicKey) = try client.sendBlocking(
                .generate(accessControl: AccessControlPolicy(protection: "ak", flags: 0), item: nil, context: nil))
        else {
            Issue.record("no key")
            return
        }
        #expect(Self.laneThreads(world.daemon) == 0, "key generation stays on the main socket")
        let digest = Data(repeating: 0x5A, count: 32)
        guard case .signature(let der) = try client.sendBlocking(.sign(handle: handle, digest: digest, context: nil))
        else {
            Issue.record("no signature")
            return
        }
        #expect(Self.laneThreads(world.daemon) == 1, "the signature took the lane")
        let key = try P256.PublicKey(x963Representation: publicKey)
        #expect(key.isValidSignature(try ECDSASignature(derRepresentation: der), forDigest: digest))
    }

    @Test func theLaneRefusesWhatItDoesNotServeAndKeepsServingOthers() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let lane = world.daemon.socket + ".lane"
        let refusedAfterWelcome: [ClientMessage] = [
            .keychain(
                1, .update(query: genericPassword("a"), attributes: ["labl": .string("x")]), .nonInteractive,
                interactive: false),
            .keychain(2, .copyMatching(genericPassword("a")), .nonInteractive, interactive: true),
            .keychain(
                3, .copyMatching(genericPassword("a").merging(["m_Limit": .string("m_LimitAll")]) { $1 }),
                .nonInteractive, interactive: false),
            .authentication(4, .createContext, interactive: false),
            .key(
                6,
                .sign(
                    handle: Data([1]), digest: Data(count: 32),
                    context: AuthenticationContextID(bytes: [UInt8](repeating: 7, count: 32))), .nonInteractive,
                interactive: false),
            .key(
                8, .generate(accessControl: AccessControlPolicy(protection: "ak", flags: 0), item: nil, context: nil),
                .nonInteractive, interactive: false),
            .subscribeKeychainEvents(5),
            .hello(versions: [1], accessGroups: ["test.daemon"], allGroups: false),
        ]
        for request in refusedAfterWelcome {
            let answer = try Self.exchange(world, [request.encoded()])
            guard answer.messages.count == 1, case .refused = answer.messages[0] else {
                Issue.record("\(request) was answered \(answer.messages)")
                continue
            }
            #expect(answer.closed)
        }
        // In the mailbox: garbage, a frame that claims more than it holds, another format version, nothing at all.
        for bytes in [
            Array("GET / HTTP/1.1\r\n\r\n".utf8), [1, 0xFF, 0xFF, 0xFF, 0xFF], [1, 0, 0, 0, 3, 0xEE, 0xEE, 0xEE],
            [2, 0, 0, 0, 0], [],
        ] as [[UInt8]] {
            let answer = try Self.exchange(world, [SecureBytes(bytes)])
            #expect(answer.closed)
            #expect(
                answer.messages.count == 1
                    && answer.messages.allSatisfy { if case .refused = $0 { true } else { false } },
                "\(answer.messages)")
        }
        // On the socket: garbage, an oversized frame, a request before the hello: refused or closed, nothing served.
        for bytes in [
            Array("GET / HTTP/1.1\r\n\r\n".utf8), [1, 0xFF, 0xFF, 0xFF, 0xFF], [1, 0, 0, 0, 3, 0xEE, 0xEE, 0xEE],
            Array(
                ClientMessage.keychain(9, .lockState, .nonInteractive, interactive: false).encoded().unprotectedData()),
        ] as [[UInt8]] {
            let answer = try Self.exchange(lane, raw: bytes)
            #expect(answer.closed)
            #expect(answer.messages.allSatisfy { if case .refused = $0 { true } else { false } }, "\(answer.messages)")
        }
        // A brief request after the hello is served.
        let served = try Self.exchange(
            world,
            [
                ClientMessage.keychain(
                    7, .add(genericPassword("served", data: "yes")), .nonInteractive, interactive: false
                ).encoded()
            ])
        #expect(served.messages == [.keychain(7, .success)])
        #expect(!served.closed)
        #expect(world.daemon.isRunning)
        #expect(try await foundPassword(try world.daemon.client(), "served") == "yes")
    }

    /// The mailbox is memory a client shares with localauthd. The daemon sized and sealed it, so the client can
    /// neither shrink it under the daemon (whose next access would fault) nor grow it; a length the daemon cannot
    /// hold is refused; and a client that rewrites its mailbox while its request is being served spoils only its
    /// own answers: the daemon decodes a copy, keeps running and serves everyone else.
    @Test func aClientCannotHurtTheDaemonThroughItsMailbox() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let (fd, passed) = try Self.welcomed(world)
        defer { close(fd) }
        defer { close(passed) }
        #expect(ftruncate(passed, 0) != 0 && errno == EPERM, "the mailbox cannot shrink")
        #expect(ftruncate(passed, off_t(LaneMailbox.size * 2)) != 0 && errno == EPERM, "the mailbox cannot grow")
        #expect(fcntl(passed, 1033 /* F_ADD_SEALS */, 0) != 0, "its seals are sealed")
        let mailbox = try LaneMailbox(mapping: passed)

        // A length over the mailbox's capacity.
        mailbox.store(.requestLength, UInt32.max)
        mailbox.store(.request, mailbox.load(.request) &+ 1)
        var bell: UInt8 = 1
        _ = send(fd, &bell, 1, Int32(MSG_NOSIGNAL))
        #expect(
            mailbox.wait(
                until: .answer, false, mailbox.load(.request), sleeps: .clientSleeps, socket: fd, polling: .zero))
        let answer = try ServerMessage(
            decoding: UnsafeRawBufferPointer(rebasing: mailbox.answerArea[0..<Int(mailbox.load(.answerLength))]))
        guard case .refused(let reason) = answer else {
            Issue.record("answered \(answer)")
            return
        }
        #expect(reason.contains("over the lane's limit"))
        var byte: UInt8 = 0
        // Closed (reset, when the daemon left a doorbell unread).
        let ended = recv(fd, &byte, 1, 0)
        #expect(ended == 0 || (ended < 0 && errno == ECONNRESET), "then the connection closed")

        // A client that scribbles over its request and length while sending valid requests.
        let scribbled = try Self.welcomed(world)
        defer { close(scribbled.fd) }
        let target = try LaneMailbox(mapping: scribbled.mailbox)
        close(scribbled.mailbox)
        let stop = StopFlag()
        let scribbler = Thread {
            var generator = SystemRandomNumberGenerator()
            while !stop.value.load(ordering: .relaxed) {
                let area = target.requestArea
                for index in 0..<64 { area[index] = generator.next() }
                target.store(.requestLength, UInt32.random(in: 0...80, using: &generator))
            }
        }
        scribbler.start()
        var answered = 0
        for number in 0..<200 {
            let frame = ClientMessage.keychain(UInt64(number), .lockState, .nonInteractive, interactive: false)
                .encoded()
            frame.withUnsafeBytes { target.requestArea.copyMemory(from: $0) }
            target.store(.requestLength, UInt32(frame.count))
            let sequence = target.load(.request) &+ 1
            target.store(.request, sequence)
            _ = send(scribbled.fd, &bell, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            guard
                target.wait(
                    until: .answer, false, sequence, sleeps: .clientSleeps, socket: scribbled.fd,
                    polling: .milliseconds(1))
            else { break }
            answered += 1
        }
        stop.value.store(true, ordering: .relaxed)
        #expect(answered > 0)
        #expect(world.daemon.isRunning, "the daemon survived")
        let client = try world.daemon.client()
        _ = try client.sendBlocking(.add(genericPassword("after the scribbler", data: "kept")))
        #expect(try await foundPassword(client, "after the scribbler") == "kept")
    }

    /// A lane connection that never says hello is closed after a few seconds: it does not keep a thread.
    @Test func aSilentLaneConnectionIsClosed() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        #expect(withUnixAddress(world.daemon.socket + ".lane", { connect(fd, $0, $1) }) == 0)
        #expect(Self.eventually { Self.laneThreads(world.daemon) == 1 })
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let start = ContinuousClock.now
        var byte: UInt8 = 0
        // The daemon refuses (a frame) or just closes; either way the connection ends within the hello's time.
        while recv(fd, &byte, 1, 0) > 0 {}
        #expect(ContinuousClock.now - start < .seconds(30))
        #expect(Self.eventually { Self.laneThreads(world.daemon) == 0 })
    }

    /// Contexts belong to the main connection that made them: named on the lane — by the same program or another —
    /// a handle is refused like on any other connection.
    @Test func aContextHandleFromTheMainConnectionIsRefusedOnTheLane() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let owner = try world.daemon.client()
        _ = try owner.sendBlocking(.add(genericPassword("guarded", data: "secret")))
        guard case .context(let id) = try await owner.send(.createContext) else {
            Issue.record("no context")
            return
        }
        var query = genericPassword("guarded")
        query["r_Data"] = .bool(true)
        query["u_AuthCtx"] = .data(Data(id.bytes))
        let answer = try Self.exchange(
            world, [ClientMessage.keychain(1, .copyMatching(query), .nonInteractive, interactive: false).encoded()])
        guard answer.messages.count == 1, case .keychainFailure(1, let status) = answer.messages[0] else {
            Issue.record("answered \(answer.messages)")
            return
        }
        #expect(status.code == .authFailed)
        // The library sends a query naming a context over the main connection, where it is the owner's.
        guard case .items = try owner.sendBlocking(.copyMatching(query)) else {
            Issue.record("the owner's query failed")
            return
        }
    }

    /// Something else listening at the lane's name (a socket put there by another process) is never sent a request:
    /// the client checks that the process behind the main socket serves the lane, and takes the main socket.
    @Test func aLaneNotServedByTheDaemonIsNotUsed() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let lane = world.daemon.socket + ".lane"
        unlink(lane)
        let impostor = try Self.listen(at: lane)
        defer { close(impostor) }
        let client = try world.daemon.client()
        _ = try client.sendBlocking(.add(genericPassword("kept", data: "from the impostor")))
        #expect(try await foundPassword(client, "kept") == "from the impostor")
        // The impostor was connected to (the check needs the connection), and sent nothing.
        let accepted = accept(impostor, nil, nil)
        #expect(accepted >= 0)
        if accepted >= 0 {
            defer { close(accepted) }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(accepted, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            #expect(recv(accepted, &byte, 1, 0) == 0, "the client hung up without a byte")
        }
        #expect(Self.laneThreads(world.daemon) == 0)
    }

    // MARK: Helpers

    final class StopFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// Posts `frames` one by one through the mailbox of a new lane connection (welcomed for `test.daemon`) and
    /// returns the answers until the daemon closed, and whether it closed (a harmless request is then not taken).
    static func exchange(_ world: DaemonWorld, _ frames: [SecureBytes]) throws -> (
        messages: [ServerMessage], closed: Bool
    ) {
        let lane = try LaneConnection(
            path: world.daemon.socket + ".lane", daemon: world.daemon.pid, accessGroups: ["test.daemon"],
            allGroups: false)
        defer { lane.close() }
        var answers: [ServerMessage] = []
        for frame in frames {
            guard let answer = try? lane.exchange(frame) else { return (answers, true) }
            answers.append(answer)
        }
        let harmless = ClientMessage.keychain(99, .lockState, .nonInteractive, interactive: false).encoded()
        return (answers, (try? lane.exchange(harmless)) == nil)
    }

    /// A raw lane connection that said hello for `test.daemon`, and the mailbox descriptor its welcome passed.
    static func welcomed(_ world: DaemonWorld) throws -> (fd: Int32, mailbox: Int32) {
        let hello = ClientMessage.hello(versions: [1], accessGroups: ["test.daemon"], allGroups: false).encoded()
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard withUnixAddress(world.daemon.socket + ".lane", { connect(fd, $0, $1) }) == 0,
            FrameReader.write(hello, to: fd)
        else {
            close(fd)
            throw CocoaError(.fileReadUnknown)
        }
        var bytes = [UInt8](repeating: 0, count: 64)
        let (count, passed) = bytes.withUnsafeMutableBytes { LaneMailbox.receive(fd, into: $0) }
        guard count > 0, passed >= 0, case .welcome(1) = try? ServerMessage(decoding: bytes[0..<count]) else {
            close(fd)
            if passed >= 0 { close(passed) }
            throw CocoaError(.fileReadUnknown)
        }
        return (fd, passed)
    }

    static func exchange(_ path: String, raw bytes: [UInt8]) throws -> (messages: [ServerMessage], closed: Bool) {
        let fd = try sendHalfClosing(path, bytes)
        defer { close(fd) }
        let frames = FrameReader(
            descriptor: fd, limit: MessageLimits.default.maximumFrameByteCount, version: MessageWriter.formatVersion)
        var messages: [ServerMessage] = []
        while true {
            do {
                guard let message = try frames.next({ try ServerMessage(decoding: $0) }) else {
                    return (messages, true)
                }
                messages.append(message)
            } catch {
                return (messages, false)
            }
        }
    }

    /// A listening Unix socket at `path`.
    static func listen(at path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard withUnixAddress(path, { bind(fd, $0, $1) }) == 0, Glibc.listen(fd, 8) == 0 else {
            close(fd)
            throw CocoaError(.fileWriteNoPermission)
        }
        return fd
    }
}
