// Package server is the Redis-protocol (RESP) front end of tally.
package server
