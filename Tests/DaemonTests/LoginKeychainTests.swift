import Foundation
import SecurityClient
import SecurityProtocol
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The login keychain (issue "The login keychain"): localauthd's idle lock, and the PAM module `pam_localauth.so`
/// in real PAM stacks (below).
@Suite("Login keychain: idle lock and the PAM module", .serialized)
struct LoginKeychainTests {
    func isLocked(_ client: any SecurityClient) async throws -> Bool {
        guard case .locked(let locked) = try await client.send(.lockState) else { return false }
        return locked
    }

    @Test func anIdleKeychainLocksAndOneInUseDoesNot() async throws {
        // idle-lock 3 s (checked every 0.75 s): requests every 0.3 s keep it open; 5 s of silence lock it.
        let world = try DaemonWorld(extraEnvironment: ["LA_IDLE_LOCK": "3"])
        defer { world.close() }
        let client = try world.daemon.client()
        #expect(try await !isLocked(client))
        for _ in 0..<15 {
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await !isLocked(client))
        }
        try await Task.sleep(for: .seconds(5))
        #expect(try await isLocked(client))
        #expect(world.daemon.logText.contains("locked an idle keychain"))
    }
}
