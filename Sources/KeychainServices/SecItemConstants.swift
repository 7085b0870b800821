// Every kSec… constant with the literal string Apple's Security framework uses (SecItemConstants.c), so
// dictionaries built here and on Apple platforms hold the same keys and values.

// MARK: Classes

/// The key of an item's class.
public let kSecClass: CFString = "class"
/// Generic password items.
public let kSecClassGenericPassword: CFString = "genp"
/// Internet password items.
public let kSecClassInternetPassword: CFString = "inet"
/// Certificate items.
public let kSecClassCertificate: CFString = "cert"
/// Cryptographic key items.
public let kSecClassKey: CFString = "keys"
/// Identity items: a certificate with its private key.
public let kSecClassIdentity: CFString = "idnt"

// MARK: Attributes

/// When the item's data can be read (a `kSecAttrAccessible…` value).
public let kSecAttrAccessible: CFString = "pdmn"
/// The item's `SecAccessControl`.
public let kSecAttrAccessControl: CFString = "accc"
/// The item's keychain access group.
public let kSecAttrAccessGroup: CFString = "agrp"
/// Whether the item is synchronizable (`true`, `false`, or `kSecAttrSynchronizableAny` in queries).
public let kSecAttrSynchronizable: CFString = "sync"
/// Matches synchronizable and non-synchronizable items.
public let kSecAttrSynchronizableAny: CFString = "syna"
/// A view hint for synchronization.
public let kSecAttrSyncViewHint: CFString = "vwht"
/// When the item was created (read-only).
public let kSecAttrCreationDate: CFString = "cdat"
/// When the item was last changed (read-only).
public let kSecAttrModificationDate: CFString = "mdat"
/// A user-visible description.
public let kSecAttrDescription: CFString = "desc"
/// A user-editable comment.
public let kSecAttrComment: CFString = "icmt"
/// The creator code (a number).
public let kSecAttrCreator: CFString = "crtr"
/// The item type code (a number) for passwords; the key type for keys.
public let kSecAttrType: CFString = "type"
/// A user-visible label.
public let kSecAttrLabel: CFString = "labl"
/// Whether the item is hidden.
public let kSecAttrIsInvisible: CFString = "invi"
/// Whether the item marks a password the user declined to save.
public let kSecAttrIsNegative: CFString = "nega"
/// The account name.
public let kSecAttrAccount: CFString = "acct"
/// The service name of a generic password.
public let kSecAttrService: CFString = "svce"
/// Application data of a generic password.
public let kSecAttrGeneric: CFString = "gena"
/// The security domain of an internet password.
public let kSecAttrSecurityDomain: CFString = "sdmn"
/// The server of an internet password.
public let kSecAttrServer: CFString = "srvr"
/// The protocol of an internet password (a `kSecAttrProtocol…` value).
public let kSecAttrProtocol: CFString = "ptcl"
/// The authentication scheme of an internet password (a `kSecAttrAuthenticationType…` value).
public let kSecAttrAuthenticationType: CFString = "atyp"
/// The port of an internet password (a number).
public let kSecAttrPort: CFString = "port"
/// The path of an internet password.
public let kSecAttrPath: CFString = "path"
/// A certificate's subject (DER).
public let kSecAttrSubject: CFString = "subj"
/// A certificate's issuer (DER).
public let kSecAttrIssuer: CFString = "issr"
/// A certificate's serial number.
public let kSecAttrSerialNumber: CFString = "slnr"
/// A certificate's subject key identifier.
public let kSecAttrSubjectKeyID: CFString = "skid"
/// A certificate's public-key hash.
public let kSecAttrPublicKeyHash: CFString = "pkhh"
/// A certificate's type (a number).
public let kSecAttrCertificateType: CFString = "ctyp"
/// A certificate's encoding (a number).
public let kSecAttrCertificateEncoding: CFString = "cenc"
/// A key's class (`kSecAttrKeyClassPublic`, `…Private`, `…Symmetric`).
public let kSecAttrKeyClass: CFString = "kcls"
/// A key's application label (for EC keys: SHA-1 of the public key).
public let kSecAttrApplicationLabel: CFString = "klbl"
/// Whether a key is stored permanently.
public let kSecAttrIsPermanent: CFString = "perm"
/// Whether a key is sensitive (macOS).
public let kSecAttrIsSensitive: CFString = "sens"
/// Whether a key is extractable (macOS).
public let kSecAttrIsExtractable: CFString = "extr"
/// A key's application tag (data).
public let kSecAttrApplicationTag: CFString = "atag"
/// A key's algorithm (a `kSecAttrKeyType…` value).
public let kSecAttrKeyType: CFString = "type"
/// A key's size in bits.
public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// A key's effective size in bits.
public let kSecAttrEffectiveKeySize: CFString = "esiz"
/// Whether a key can encrypt.
public let kSecAttrCanEncrypt: CFString = "encr"
/// Whether a key can decrypt.
public let kSecAttrCanDecrypt: CFString = "decr"
/// Whether a key can derive other keys.
public let kSecAttrCanDerive: CFString = "drve"
/// Whether a key can sign.
public let kSecAttrCanSign: CFString = "sign"
/// Whether a key can verify.
public let kSecAttrCanVerify: CFString = "vrfy"
/// Whether a key can wrap other keys.
public let kSecAttrCanWrap: CFString = "wrap"
/// Whether a key can unwrap other keys.
public let kSecAttrCanUnwrap: CFString = "unwp"
/// The token holding a key.
public let kSecAttrTokenID: CFString = "tkid"
/// The Secure Enclave token (here: the software enclave).
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
/// The access group of token items.
public let kSecAttrAccessGroupToken: CFString = "com.apple.token"

// MARK: Accessibility

/// Readable only while the device is unlocked; only if a passcode is set; never leaves the device.
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Readable only while unlocked (the default).
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Readable only while unlocked; never leaves the device.
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Readable after the first unlock since boot.
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Readable after the first unlock since boot; never leaves the device.
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Always readable (deprecated by Apple).
public let kSecAttrAccessibleAlways: CFString = "dk"
/// Always readable; never leaves the device (deprecated by Apple).
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// MARK: Key classes and types

/// A public key.
public let kSecAttrKeyClassPublic: CFString = "0"
/// A private key.
public let kSecAttrKeyClassPrivate: CFString = "1"
/// A symmetric key.
public let kSecAttrKeyClassSymmetric: CFString = "2"
/// RSA.
public let kSecAttrKeyTypeRSA: CFString = "42"
/// Elliptic curve (same value as `kSecAttrKeyTypeECSECPrimeRandom`).
public let kSecAttrKeyTypeEC: CFString = "73"
/// Elliptic curve over a prime field (P-256 here).
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
/// Attributes of the private key, in `SecKeyCreateRandomKey`'s parameters.
public let kSecPrivateKeyAttrs: CFString = "private"
/// Attributes of the public key, in `SecKeyCreateRandomKey`'s parameters.
public let kSecPublicKeyAttrs: CFString = "public"

// MARK: Internet protocols

/// FTP.
public let kSecAttrProtocolFTP: CFString = "ftp "
/// FTP account.
public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// HTTP.
public let kSecAttrProtocolHTTP: CFString = "http"
/// IRC.
public let kSecAttrProtocolIRC: CFString = "irc "
/// NNTP.
public let kSecAttrProtocolNNTP: CFString = "nntp"
/// POP3.
public let kSecAttrProtocolPOP3: CFString = "pop3"
/// SMTP.
public let kSecAttrProtocolSMTP: CFString = "smtp"
/// SOCKS.
public let kSecAttrProtocolSOCKS: CFString = "sox "
/// IMAP.
public let kSecAttrProtocolIMAP: CFString = "imap"
/// LDAP.
public let kSecAttrProtocolLDAP: CFString = "ldap"
/// AppleTalk.
public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// AFP.
public let kSecAttrProtocolAFP: CFString = "afp "
/// Telnet.
public let kSecAttrProtocolTelnet: CFString = "teln"
/// SSH.
public let kSecAttrProtocolSSH: CFString = "ssh "
/// FTP over TLS.
public let kSecAttrProtocolFTPS: CFString = "ftps"
/// HTTPS.
public let kSecAttrProtocolHTTPS: CFString = "htps"
/// HTTP proxy.
public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// HTTPS proxy.
public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// FTP proxy.
public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// SMB.
public let kSecAttrProtocolSMB: CFString = "smb "
/// RTSP.
public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// RTSP proxy.
public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// DAAP.
public let kSecAttrProtocolDAAP: CFString = "daap"
/// EPPC.
public let kSecAttrProtocolEPPC: CFString = "eppc"
/// IPP.
public let kSecAttrProtocolIPP: CFString = "ipp "
/// NNTP over TLS.
public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// LDAP over TLS.
public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// Telnet over TLS.
public let kSecAttrProtocolTelnetS: CFString = "tels"
/// IMAP over TLS.
public let kSecAttrProtocolIMAPS: CFString = "imps"
/// IRC over TLS.
public let kSecAttrProtocolIRCS: CFString = "ircs"
/// POP3 over TLS.
public let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: Authentication types

/// NTLM.
public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// MSN.
public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// DPA.
public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// RPA.
public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
/// HTTP basic.
public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// HTTP digest.
public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// HTML form.
public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// The default scheme.
public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: Search

/// How many matches to return: `kSecMatchLimitOne` (the default), `kSecMatchLimitAll` or a number.
public let kSecMatchLimit: CFString = "m_Limit"
/// One match.
public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// Every match.
public let kSecMatchLimitAll: CFString = "m_LimitAll"
/// Compare strings without regard to case.
public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Match certificates by policy (not supported: `errSecParam`).
public let kSecMatchPolicy: CFString = "m_Policy"
/// Match within a list of items (not supported: `errSecParam`).
public let kSecMatchItemList: CFString = "m_ItemList"
/// Match certificates by issuer (not supported: `errSecParam`).
public let kSecMatchIssuers: CFString = "m_Issuers"
/// Match certificates valid on a date (not supported: `errSecParam`).
public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
/// Match only trusted certificates (not supported: `errSecParam`).
public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"

// MARK: Return types and values

/// Return the item's data.
public let kSecReturnData: CFString = "r_Data"
/// Return the item's attributes.
public let kSecReturnAttributes: CFString = "r_Attributes"
/// Return a reference (`SecCertificate`, `SecKey`, `SecIdentity`).
public let kSecReturnRef: CFString = "r_Ref"
/// Return a persistent reference.
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"
/// The item's data.
public let kSecValueData: CFString = "v_Data"
/// A reference to the item.
public let kSecValueRef: CFString = "v_Ref"
/// A persistent reference to the item.
public let kSecValuePersistentRef: CFString = "v_PersistentRef"
/// The item's persistent reference as an attribute (`"persistref"`): returned among `kSecReturnAttributes`
/// results, and accepted in a query with the same meaning as `kSecValuePersistentRef`.
public let kSecAttrPersistentReference: CFString = "persistref"

// MARK: Use

/// The `LAContext` to authenticate with.
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// Whether the user may be asked to authenticate.
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// The user may be asked (the default).
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// Fail with `errSecInteractionNotAllowed` instead of asking.
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// Skip items that would need an authentication (`SecItemCopyMatching` only).
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// The reason shown when asking (deprecated by Apple for `LAContext.localizedReason`).
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// Do not ask (deprecated by Apple).
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// Use the data-protection keychain (always so here).
public let kSecUseDataProtectionKeychain: CFString = "nleg"
