import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "localauthd": many connections at once against one daemon, and a daemon killed under load.
@Suite("localauthd under load", .serialized, .timeLimit(.minutes(4)))
struct DaemonLoadTests {
    /// 32 connections × 1,000 mixed requests (add, find, update, delete, sign with a key whose access control is
    /// satisfied): no error, and at the end every item that should be there is, with its last value.
    @Test func thirtyTwoClientsTimesAThousandMixedRequestsLoseNothing() async throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let signer = try world.daemon.client()
        // `.privateKeyUsage` alone: the list is checked on every signature and satisfied without a prompt.
        let policy = AccessControlPolicy(protection: "ak", flags: 1 << 30)
        guard
            case .generated(let key, _) = try await signer.send(
                .generate(accessControl: policy, item: nil, context: nil))
        else {
            Issue.record("no key")
            return
        }
        let digest = Data(repeating: 7, count: 32)
        let errors = Counter()
        let daemon = world.daemon
        try await withThrowingTaskGroup(of: Void.self) { group in
            for clientIndex in 0..<32 {
                group.addTask {
                    let client = try daemon.client()
                    for step in 0..<250 {
                        let account = "c\(clientIndex)-\(step)"
                        do {
                            _ = try await client.send(.add(genericPassword(account, data: "v0")))
                            guard try await foundPassword(client, account) == "v0" else {
                                errors.add()
                                continue
                            }
                            _ = try await client.send(
                                .update(
                                    query: genericPassword(account),
                                    attributes: ["v_Data": .secret(SecureBytes(Array("v1".utf8)))]))
                            if step % 5 == 0 {
                                _ = try await client.send(.delete(genericPassword(account)))
                            } else {
                                guard
                                    case .signature = try await client.send(
                                        .sign(handle: key, digest: digest, context: nil))
                                else {
                                    errors.add()
                                    continue
                                }
                            }
                        } catch {
                            errors.add()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(errors.value == 0)
        // Every kept item is there with its updated value; every deleted one is gone.
        let checker = try world.daemon.client()
        var query: [String: KeychainValue] = ["class": .string("genp"), "svce": .string("daemon")]
        query["m_Limit"] = .string("m_LimitAll")
        query["r_Attributes"] = .bool(true)
        guard case .items(let all) = try await checker.send(.copyMatching(query)) else {
            Issue.record("nothing found")
            return
        }
        #expect(all.items.count == 32 * 200)
        for (clientIndex, step) in [(0, 1), (31, 249), (17, 123)] {
            #expect(try await foundPassword(checker, "c\(clientIndex)-\(step)") == "v1")
        }
        #expect(try await foundPassword(checker, "c5-10") == nil)
    }

    /// One connection shared at once by threads blocked at a synchronous edge (which read the socket themselves,
    /// taking turns), tasks and a subscription: every request gets its own answer (each finds the value it wrote),
    /// and the subscription sees every add. Then an idle connection notices a restarted daemon.
    @Test func oneConnectionSharedByThreadsTasksAndASubscriptionAnswersEachItsOwn() async throws {
        var world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client()
        let rounds = 100
        let (subscribed, inPlace) = AsyncStream.makeStream(of: Void.self)
        let events = Task {
            var added = 0
            for await event in client.keychainEvents() where event.kind == .added {
                // Probes are internet passwords; the rounds' items generic ones.
                if event.itemClass == .internetPassword { inPlace.yield() }
                if event.itemClass == .genericPassword { added += 1 }
                if added == 12 * rounds { break }
            }
            return added
        }
        // The subscription is in place once one of the probes comes back as an event.
        let probing = Task {
            for index in 0..<400 where !Task.isCancelled {
                _ = try? await client.send(.add(["class": .string("inet"), "srvr": .string("probe\(index)")]))
                try? await Task.sleep(for: .milliseconds(25))
            }
        }
        for await _ in subscribed { break }
        probing.cancel()
        _ = await probing.value

        let errors = Counter()
        let threads = (0..<6).map { index in
            let done = DispatchSemaphore(value: 0)
            Thread {
                for step in 0..<rounds {
                    let account = "thread\(index)-\(step)"
                    var query = genericPassword(account)
                    query["r_Data"] = .bool(true)
                    do {
                        _ = try client.sendBlocking(.add(genericPassword(account, data: account)))
                        guard case .items(let found) = try client.sendBlocking(.copyMatching(query)),
                            let data = found.items.first?.data,
                            String(decoding: data.unprotectedData(), as: UTF8.self) == account
                        else {
                            errors.add()
                            continue
                        }
                    } catch {
                        errors.add()
                    }
                }
                done.signal()
            }.start()
            return done
        }
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<6 {
                group.addTask {
                    for step in 0..<rounds {
                        let account = "task\(index)-\(step)"
                        do {
                            _ = try await client.send(.add(genericPassword(account, data: account)))
                            if try await foundPassword(client, account) != account { errors.add() }
                        } catch {
                            errors.add()
                        }
                    }
                }
            }
        }
        for done in threads { done.wait() }
        #expect(errors.value == 0)
        let seen = await withTaskGroup(of: Int?.self) { group in
            group.addTask { await events.value }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        #expect(seen == 12 * rounds, "the subscription saw every add")
        events.cancel()

        // An idle connection notices that the daemon went away; its next request connects to the new one.
        #expect(world.daemon.stop(SIGTERM).status == 0)
        try world.restart()
        #expect(try await foundPassword(client, "task0-0") == "task0-0")
    }

    /// Eight connections add items as fast as they can; the daemon is stopped (SIGTERM: gracefully, exit status 0)
    /// or killed (SIGKILL) in the middle. Every request either succeeds or fails cleanly (`errSecNotAvailable`);
    /// after a restart the store opens and every add the daemon acknowledged is there.
    @Test(arguments: [SIGTERM, SIGKILL])
    func aDaemonStoppedUnderLoadKeepsEveryAcknowledgedWrite(_ signal: Int32) async throws {
        var world = try DaemonWorld()
        defer { world.close() }
        let acknowledged = Acknowledged()
        let unclean = Counter()
        let daemon = world.daemon
        let writers = Task {
            await withTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        guard let client = try? daemon.client() else { return }
                        for step in 0... {
                            let account = "w\(writer)-\(step)"
                            do {
                                _ = try await client.send(.add(genericPassword(account, data: account)))
                                acknowledged.add(account)
                            } catch let status as KeychainStatus where status.code == .notAvailable {
                                return
                            } catch {
                                unclean.add()
                                return
                            }
                        }
                    }
                }
            }
        }
        try await Task.sleep(for: .milliseconds(1500))
        let stopped = world.daemon.stop(signal)
        if signal == SIGKILL {
            #expect(stopped.bySignal)
        } else {
            let log = (try? String(contentsOfFile: world.daemon.log, encoding: .utf8)) ?? ""
            #expect(!stopped.bySignal && stopped.status == 0, "daemon log ends: \(log.suffix(1500))")
        }
        await writers.value
        #expect(unclean.value == 0)
        let written = acknowledged.accounts
        #expect(written.count > 100)
        try world.restart()
        let client = try world.daemon.client()
        var missing = 0
        for account in written where try await foundPassword(client, account) != account { missing += 1 }
        #expect(missing == 0)
    }
}

/// A count shared by the load's tasks.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// The accounts whose adds the daemon acknowledged, in order.
final class Acknowledged: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ account: String) { list.withLock { $0.append(account) } }
    var accounts: [String] { list.withLock { $0 } }
}
