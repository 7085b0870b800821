/// The keys (and the match-limit values) of a keychain request's dictionary that code reads or writes by name, as
/// Apple spells them (`kSecAttrAccessGroup` is `"agrp"`): defined once, here. KeychainServices' `kSec…` constants for
/// these keys are made from them; the engine, the store, the typed API and the transport name them through this.
package enum ItemKey {
    package static let itemClass = "class"
    package static let accessGroup = "agrp"
    package static let accessible = "pdmn"
    package static let synchronizable = "sync"
    package static let account = "acct"
    package static let service = "svce"
    package static let label = "labl"
    package static let accessControl = "accc"
    package static let valueData = "v_Data"
    package static let valuePersistentReference = "v_PersistentRef"
    package static let returnData = "r_Data"
    package static let returnAttributes = "r_Attributes"
    package static let returnReference = "r_Ref"
    package static let returnPersistentReference = "r_PersistentRef"
    package static let matchLimit = "m_Limit"
    package static let matchLimitOne = "m_LimitOne"
    package static let matchLimitAll = "m_LimitAll"
    package static let matchCaseInsensitive = "m_CaseInsensitive"
    package static let authenticationContext = "u_AuthCtx"
    package static let operationPrompt = "u_OpPrompt"
}
