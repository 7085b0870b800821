import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

/// `lactl` is registered as an administrative tool, and every program of the user can run it with the claim it
/// likes (`LA_ACCESS_GROUPS`, `dump`'s every group). Through localauthd its hello therefore grants only lactl's own
/// groups: what it claims beyond them waits until the user authenticated (finger or passcode) through the daemon
/// on lactl's own connection. A program refused app A's group cannot borrow lactl to read or plant A's items.
/// Real daemon configured as installed, the isolation probes as app A, lactl on a pipe or on a terminal.
@Suite("localauthd: lactl is not a confused deputy", .serialized, .timeLimit(.minutes(4)))
struct AdministrativeToolTests {
    static let notFound = String(AppIsolationTests.notFound)

    /// A daemon as installed: administrative claims wait for the user.
    static func world() throws -> DaemonWorld {
        try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
    }

    /// Runs lactl as a program of the user would in the background: this world's daemon, no terminal to ask on.
    static func lactl(
        _ arguments: [String], world: DaemonWorld, environment extra: [String: String] = [:]
    ) throws -> (status: Int32, output: String) {
        var environment = inheritedEnvironment(merging: extra)
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        environment["LA_PRESENTER"] = "none"
        return try runCapturingOutput(try lactlExecutable(), arguments, environment: environment)
    }

    /// Runs `lactl <command>` on a terminal of its own, typing `passcode` at PAM's question; what the terminal showed.
    static func lactlOnTerminal(
        _ command: String, world: DaemonWorld, typing passcode: String, environment extra: [String: String] = [:]
    ) throws -> (status: Int32, screen: String) {
        var environment = inheritedEnvironment(merging: extra)
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        environment["LA_PRESENTER"] = nil
        return try runOnTerminal(
            try lactlExecutable().path + " " + command, environment: environment,
            answering: [("Password:", passcode + "\r")])
    }

    /// A stored a secret; `lactl keychain dump -d`, run by another program of the user with nobody to ask, prints
    /// none of A's items and says why. Naming A's group (`-G`, `LA_ACCESS_GROUPS`) does not get them either.
    @Test func lactlRunByAnotherProgramDumpsNothingOfAnAppWithoutTheUser() throws {
        let world = try Self.world()
        defer { world.close() }
        let (a, _) = try AppIsolationTests.probes(world)
        let groupA = try #require(try a.run(["whoami"])["group"])
        #expect(try a.run(["add", "svc", "acct", "a-secret"])["status"] == "0")

        let dump = try Self.lactl(["keychain", "dump", "-d"], world: world)
        #expect(dump.status == 1, "\(dump.output)")
        #expect(!dump.output.contains("a-secret"), "\(dump.output)")
        #expect(!dump.output.contains("acct"), "not even the attributes: \(dump.output)")
        #expect(dump.output.contains("use the items of other applications (allowed only with your finger or passcode)"))
        #expect(dump.output.contains("User interaction is not allowed"), "\(dump.output)")

        let named = try Self.lactl(
            ["keychain", "find-generic-password", "-s", "svc", "-a", "acct", "-w", "-G", groupA], world: world)
        #expect(named.status == 1 && !named.output.contains("a-secret"), "\(named.output)")
        let claimed = try Self.lactl(
            ["keychain", "find-generic-password", "-s", "svc", "-a", "acct", "-w"], world: world,
            environment: ["LA_ACCESS_GROUPS": groupA])
        #expect(claimed.status == 1 && !claimed.output.contains("a-secret"), "\(claimed.output)")
        #expect(try a.run(["read", "svc", "acct"])["value"] == "a-secret")
    }

    /// Without the user, lactl claiming A's group (`LA_ACCESS_GROUPS`, or `-G`) adds nothing to it: A finds no
    /// planted item. lactl's own group needs nobody: it adds and reads there freely, and A does not see that.
    @Test func lactlRunByAnotherProgramCannotPlantAnItemInAnAppsGroup() throws {
        let world = try Self.world()
        defer { world.close() }
        let (a, _) = try AppIsolationTests.probes(world)
        let groupA = try #require(try a.run(["whoami"])["group"])

        let claimed = try Self.lactl(
            ["keychain", "add-generic-password", "-s", "svc", "-a", "planted", "-w", "evil"], world: world,
            environment: ["LA_ACCESS_GROUPS": groupA])
        #expect(claimed.status == 1, "\(claimed.output)")
        #expect(try a.run(["read", "svc", "planted"])["status"] == Self.notFound)
        let named = try Self.lactl(
            ["keychain", "add-generic-password", "-s", "svc", "-a", "named", "-w", "evil", "-G", groupA], world: world)
        #expect(named.status == 1, "\(named.output)")
        #expect(try a.run(["read", "svc", "named"])["status"] == Self.notFound)

        let own = try Self.lactl(
            ["keychain", "add-generic-password", "-s", "svc", "-a", "mine", "-w", "m-secret"], world: world)
        #expect(own.status == 0, "\(own.output)")
        let found = try Self.lactl(
            ["keychain", "find-generic-password", "-s", "svc", "-a", "mine", "-w"], world: world)
        #expect(found.status == 0 && found.output == "m-secret\n", "\(found.output)")
        #expect(try a.run(["read", "svc", "mine"])["status"] == Self.notFound)
    }

    /// The user at the terminal: with the passcode, `lactl keychain dump -d` prints A's secret, and lactl acts in
    /// A's group; a wrong passcode gets nothing. The prompt says what lactl wants.
    @Test func withTheUsersPasscodeLactlDumpsAndActsForAnApp() throws {
        let world = try Self.world()
        defer { world.close() }
        let (a, _) = try AppIsolationTests.probes(world)
        let groupA = try #require(try a.run(["whoami"])["group"])
        #expect(try a.run(["add", "svc", "acct", "a-secret"])["status"] == "0")

        let wrong = try Self.lactlOnTerminal("keychain dump -d", world: world, typing: "guess")
        #expect(wrong.status == 1, "\(wrong.screen)")
        #expect(!wrong.screen.contains("a-secret"), "\(wrong.screen)")

        let dump = try Self.lactlOnTerminal("keychain dump -d", world: world, typing: "secret")
        #expect(dump.status == 0, "\(dump.screen)")
        #expect(dump.screen.contains("lactl wants to use the items of every application"), "\(dump.screen)")
        #expect(dump.screen.contains("a-secret"), "\(dump.screen)")

        let added = try Self.lactlOnTerminal(
            "keychain add-generic-password -s svc -a given -w from-user", world: world, typing: "secret",
            environment: ["LA_ACCESS_GROUPS": groupA])
        #expect(added.status == 0, "\(added.screen)")
        #expect(added.screen.contains("lactl wants to use the items of \(groupA)"), "\(added.screen)")
        #expect(try a.run(["read", "svc", "given"])["value"] == "from-user")
        #expect(!world.daemon.logText.contains("a-secret"), "secrets never reach the log")
    }

    /// The request itself, from an administrative program (this test runner): a context without a credential, or
    /// another connection's, widens nothing; after the passcode in its own context the connection holds the
    /// group it claimed, and a synchronous lookup (which would take the lane, whose hello is never widened) finds
    /// A's item. The context is spent: it widens once.
    @Test func aConnectionIsWidenedOnlyByAFreshAuthenticationInItsOwnContext() async throws {
        let world = try Self.world()
        defer { world.close() }
        let (a, _) = try AppIsolationTests.probes(world)
        let groupA = try #require(try a.run(["whoami"])["group"])
        #expect(try a.run(["add", "daemon", "acct", "a-secret"])["status"] == "0")

        let client = try world.daemon.client(accessGroups: [groupA])
        guard case .caller(let before) = try await client.send(.callerIdentity) else {
            Issue.record("no caller")
            return
        }
        #expect(before.accessGroups == ["localtest.runner"], "its own group until the user says otherwise")
        #expect(try lookedUp(client, "acct") == nil)

        guard case .context(let empty) = try await client.send(.createContext) else {
            Issue.record("no context")
            return
        }
        #expect(
            await authenticationCode { _ = try await client.send(.widenAccessGroups(context: empty)) }
                == .authenticationFailed)
        let other = try world.daemon.client(accessGroups: [groupA])
        let stranger = try await other.passcodeContext(
            reason: "stranger", presenter: FixedPasscodePresenter(passcode: "secret"))
        #expect(
            await authenticationCode { _ = try await client.send(.widenAccessGroups(context: stranger)) }
                == .invalidContext)
        #expect(try lookedUp(client, "acct") == nil)

        let context = try await client.passcodeContext(
            reason: "widen", presenter: FixedPasscodePresenter(passcode: "secret"))
        guard case .caller(let after) = try await client.send(.widenAccessGroups(context: context)) else {
            Issue.record("not widened")
            return
        }
        #expect(after.accessGroups == [groupA])
        #expect(try lookedUp(client, "acct") == "a-secret")
        await #expect(throws: (any Error).self, "spent") {
            _ = try await client.send(.widenAccessGroups(context: context))
        }
        // The other connection of the same program, never widened, still holds only its own group.
        #expect(try lookedUp(other, "acct") == nil)
    }

    /// What a synchronous lookup of `account` finds through `client` (the way `SecItemCopyMatching` asks); nil
    /// when nothing, or when the group is not held.
    func lookedUp(_ client: SocketClient, _ account: String) throws -> String? {
        var query = genericPassword(account)
        query["r_Data"] = .bool(true)
        do {
            guard case .items(let results) = try client.sendBlocking(.copyMatching(query)),
                let data = results.items.first?.data
            else { return nil }
            return String(decoding: data.unprotectedData(), as: UTF8.self)
        } catch let status as KeychainStatus where status.code == .itemNotFound {
            return nil
        }
    }
}
