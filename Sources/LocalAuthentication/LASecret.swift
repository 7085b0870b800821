import Foundation
import KeychainServices

/// A persisted right's secret (`LASecret`), kept as a keychain item under the right's requirement.
///
/// Readable only while the right is authorized (the right's authorized context is the credential); otherwise
/// reading throws ``LAError`` `authenticationFailed` saying the right is not authorized. The secret cannot be
/// changed after the right is saved.
public final class LASecret: NSObject, Sendable {
    private let identifier: String
    private let hasData: Bool
    private let right: WeakRight

    init(identifier: String, hasData: Bool, right: WeakRight) {
        self.identifier = identifier
        self.hasData = hasData
        self.right = right
        super.init()
    }

    /// The secret's bytes (empty when the right was saved without a secret).
    public var rawData: Data {
        get async throws {
            let (right, context) = try right.authorizedContext()
            guard hasData else { return Data() }
            let identifier = self.identifier
            return try await keychainWork {
                var query = LARightStore.secretQuery(identifier)
                query[kSecReturnData as String] = true
                query[kSecUseAuthenticationContext as String] = context
                var result: CFTypeRef?
                let status = KeychainClientSelection.$current.withValue(right.client) {
                    SecItemCopyMatching(query as NSDictionary, &result)
                }
                guard status == errSecSuccess, let data = result as? Data else {
                    throw LAError(.authenticationFailed, "the right's secret cannot be read (status \(status))")
                }
                return data
            }
        }
    }

    /// Calls `completion` (on another thread) with ``rawData`` or the error.
    public func loadData(completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        Task.detached {
            do { completion(try await self.rawData, nil) } catch { completion(nil, error) }
        }
    }
}
