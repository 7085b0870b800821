import Foundation
import Testing

@testable import FIDOAuthenticator

/// The PIN's guess count is a compare-and-swap on its keychain item: writers that race lose no count.
@Suite("lactl fido: the PIN's record")
struct FIDOPINRecordTests {
    /// 200 decrements from 8 tasks at once on one keychain: every one lands (a plain read-then-write loses some).
    @Test func concurrentCountsAreAllKept() async throws {
        let world = try RightsWorld()
        let credentials = FIDOCredentials(client: world.client)
        try await credentials.updatePIN {
            $0 = FIDOCredentials.PINRecord(hash: [UInt8](repeating: 7, count: 16), retries: 1_000)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<25 { try await credentials.updatePIN { $0.retries -= 1 } }
                }
            }
            try await group.waitForAll()
        }
        let record = try await credentials.pinRecord()
        #expect(record.retries == 800 && record.hash == [UInt8](repeating: 7, count: 16), "\(record)")
        await world.close()
    }
}
