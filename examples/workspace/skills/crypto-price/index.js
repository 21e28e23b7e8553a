// crypto-price: an OwliaBot-style JS skill. `context.fetch` goes through the skillbox core,
// which allows only the hosts in owliabot.permissions.network.
export const tools = {
  get_price: async ({ coin, currency = "usd" }, context) => {
    const url = `https://api.coingecko.com/api/v3/simple/price?ids=${encodeURIComponent(coin)}&vs_currencies=${encodeURIComponent(currency)}`;
    const res = await context.fetch(url);
    const data = JSON.parse(res.body);
    if (!data[coin]) {
      return { success: false, error: `Coin not found: ${coin}` };
    }
    return { success: true, data: { coin, currency, price: data[coin][currency] } };
  },
};
