// Package memory holds redstream's in-process engines: rate limiters and deduplicators whose
// state lives in this process's memory, deciding with the algorithms of package core.
package memory
