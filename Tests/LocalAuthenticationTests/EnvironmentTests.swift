import Foundation
import KeychainServices
import LocalAuthentication
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import TestSupport
import Testing

/// Records every state change an environment reports, and lets a test wait for one that matches.
final class EnvironmentRecorder: LAEnvironmentObserver, @unchecked Sendable {
    // Safe to share: `changes` is only touched under `lock`.
    private let lock = NSLock()
    private var changes: [(old: LAEnvironmentState, new: LAEnvironmentState)] = []

    func environment(_ environment: LAEnvironment, stateDidChangeFromOldState oldState: LAEnvironmentState) {
        let new = environment.state
        lock.withLock { changes.append((oldState, new)) }
    }

    var count: Int { lock.withLock { changes.count } }

    /// Waits (up to 10 s) for a reported change whose new state satisfies `condition`.
    func waitFor(_ condition: (LAEnvironmentState) -> Bool) async -> Bool {
        for _ in 0..<500 {
            if lock.withLock({ changes.contains { condition($0.new) } }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

/// Issue "Apple compatibility measured on real code", item 5: the iOS 18 / macOS 15 surface (LAEnvironment,
/// LAContext.domainState per application, LAError.biometryDisconnected) on the virtual reader and pam_matrix.
/// Apple: LAEnvironment.h, LAEnvironmentState.h, LAEnvironmentMechanism*.h, LADomainState.h (iOS 18 SDK).
@Suite("LAEnvironment and per-application domain state", .serialized, .virtualReaderLock(timeLimit: .seconds(60)))
struct EnvironmentTests {
    /// Enrolls `printID` through the enrollment request with a passcode context, as `lactl biometry enroll` does.
    func enrollThroughTheEngine(_ world: LocalAuthenticationWorld, _ printID: String, finger: Finger) async throws {
        try await world.enroll(printID, finger: finger)
    }

    @Test func stateShowsTheReaderEnrollmentLockoutAndPassword() async throws {
        let world = try LocalAuthenticationWorld()
        let environment = KeychainClientSelection.$current.withValue(world.client) { LAEnvironment.currentUser }
        let before = environment.state
        #expect(before.biometry?.biometryType == .touchID)
        #expect(before.biometry?.isEnrolled == false)
        #expect(before.biometry?.isUsable == false)
        #expect(before.biometry?.stateHash == nil)
        #expect(before.userPassword?.isSet == true)
        #expect(before.companions.isEmpty)

        try await enrollThroughTheEngine(world, "alice-1", finger: .rightIndex)
        let enrolled = environment.state
        #expect(enrolled.biometry?.isEnrolled == true)
        #expect(enrolled.biometry?.isUsable == true)
        #expect(enrolled.biometry?.stateHash != nil)
        #expect(enrolled.allMechanisms.count == 2)

        try await world.failScans(5)
        let locked = environment.state
        #expect(locked.biometry?.isLockedOut == true)
        #expect(locked.biometry?.isUsable == false)

        let noReader = try LocalAuthenticationWorld(reader: false, pamService: false)
        let absent = KeychainClientSelection.$current.withValue(noReader.client) { LAEnvironment.currentUser }.state
        #expect(absent.biometry == nil)
        #expect(absent.userPassword?.isSet == false)
        await noReader.close()
        await world.close()
    }

    @Test(.libfprintOnly("unplugs libfprint's virtual device; fprintd loses an unplugged device until it restarts"))
    func observersHearOfEnrollmentLockoutAndUnplugging() async throws {
        let world = try LocalAuthenticationWorld()
        let environment = KeychainClientSelection.$current.withValue(world.client) { LAEnvironment.currentUser }
        let recorder = EnvironmentRecorder()
        environment.addObserver(recorder)

        try await enrollThroughTheEngine(world, "alice-1", finger: .rightIndex)
        #expect(await recorder.waitFor { $0.biometry?.isEnrolled == true })

        try await world.failScans(5)
        #expect(await recorder.waitFor { $0.biometry?.isLockedOut == true })

        // The passcode lifts the lockout; then the reader goes away in the middle of a scan.
        let recovery = makeContext(in: world, presenter: ScriptedAuthenticationPresenter(passcodes: ["secret"]))
        #expect(try await recovery.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "recover"))
        #expect(await recorder.waitFor { $0.biometry?.isLockedOut == false })
        let scanning = makeContext(in: world)
        async let code = laErrorCode {
            try await scanning.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "scan")
        }
        try await world.socket.send("SLEEP 50", "UNPLUG")
        #expect(await code == .biometryDisconnected)
        #expect(await recorder.waitFor { $0.biometry == nil }, "the unplugged reader leaves the environment")

        // A removed observer hears nothing more, though the enrolled set changes again.
        environment.removeObserver(recorder)
        let heard = recorder.count
        try await enrollThroughTheEngine(world, "alice-2", finger: .leftIndex)
        try await Task.sleep(for: .milliseconds(300))
        #expect(recorder.count == heard)
        _ = recorder
        await world.close()
    }

    @Test func eachApplicationSeesItsOwnStateHash() async throws {
        let world = try LocalAuthenticationWorld()
        try await enrollThroughTheEngine(world, "alice-1", finger: .rightIndex)
        let one = try world.engine.client(accessGroups: ["TEAM.com.one"])
        let two = try world.engine.client(accessGroups: ["TEAM.com.two"])
        func hash(_ client: any SecurityClient) -> Data? {
            KeychainClientSelection.$current.withValue(client) { LAContext().domainState.biometry.stateHash }
        }
        let oneBefore = try #require(hash(one))
        let twoBefore = try #require(hash(two))
        #expect(oneBefore != twoBefore)
        if let contexts = world.engine.embeddedEngine?.authentication {
            // The engine's own hash (readable only inside an embedded engine) is neither application's.
            let global = try #require(try contexts.currentStateHash())
            #expect(oneBefore != global && twoBefore != global)
        }
        #expect(hash(one) == oneBefore, "stable while the set is unchanged")

        try await enrollThroughTheEngine(world, "alice-2", finger: .leftIndex)
        #expect(hash(one) != oneBefore)
        #expect(hash(two) != twoBefore)
        #expect(hash(one) != hash(two))
        await world.close()
    }
}
