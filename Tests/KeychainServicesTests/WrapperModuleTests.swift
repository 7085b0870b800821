import Foundation
import KeychainServices
import KeychainWrapperFixture
import Testing

/// Issue "Apple compatibility measured on real code", item 3: a program's own `Keychain` and `KeychainError`
/// beside `import KeychainServices`, used unqualified, as wrappers written for Apple's `Security` do. (This file
/// imports no other module of ours: the names below must resolve to the wrapper's.)
@Suite("A wrapper's own Keychain and KeychainError beside KeychainServices")
struct WrapperModuleTests {
    @Test func theWrappersOwnNamesResolveUnqualified() throws {
        let store = TestStore()
        try store.with {
            let keychain = Keychain(service: "com.example.wrapper")
            try keychain.set("token-1", key: "api")
            #expect(try keychain.get("api") == "token-1")
            try keychain.set("token-2", key: "api")
            #expect(try keychain.get("api") == "token-2")
            try keychain.remove("api")
            #expect(try keychain.get("api") == nil)
            let error: KeychainError = .unhandled(errSecParam)
            #expect(error == KeychainError.unhandled(-50))
        }
    }
}
